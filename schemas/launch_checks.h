#pragma once
// validate_plan's checks of what Hopper / Blackwell launches add: grids, clusters, SM-count
// grids and TMA tensor maps. Each returns "" when the launch is fine, else what is wrong
// (validate_plan prefixes the launch's name).
#include <string>

#include "schemas/plan_model.h"

namespace kplan::plan {

// Non-empty grid and block; cluster dims >= 1 with at most 8 blocks (the portable limit), each
// grid dim a multiple of the cluster's; an SM-count grid has grid[0] == 0.
std::string launch_geometry_error(const Launch& l);

// Every tensor map: base a buffer slot or weight that exists, 16-byte aligned offset, rank 1..5,
// strides multiples of 16 below 2^40, box dims 1..256 with a 16-byte multiple innermost row
// that fits the swizzle span, a dtype TMA moves, and the whole tensor inside its base.
std::string tensor_maps_error(const Plan& plan, const Launch& l);

}  // namespace kplan::plan
