#include "compiler/frontend/rope_config.h"

#include <cmath>

namespace kplan {

namespace {

std::string rope_type_of(const JsonFields& f, std::string* key_used) {
  for (const char* key : {"rope_type", "type"}) {
    if (f.has(key)) {
      *key_used = key;
      return f.req_string(key);
    }
  }
  f.fail("rope_type", "missing required field (neither 'rope_type' nor 'type' is given)");
}

RopeScaling parse_scaling(const JsonFields& f, int64_t max_position_embeddings) {
  std::string type_key;
  std::string type = rope_type_of(f, &type_key);
  RopeScaling r;
  if (type == "default") return r;
  if (type != "yarn")
    f.fail(type_key, "unsupported rope type '" + type + "' (kplan supports default and yarn)");
  r.type = "yarn";
  r.factor = f.req_number("factor");
  if (!(r.factor >= 1.0)) f.fail("factor", "YaRN factor must be >= 1, got " + std::to_string(r.factor));
  r.original_max_position_embeddings = f.req_int("original_max_position_embeddings");
  if (r.original_max_position_embeddings <= 0)
    f.fail("original_max_position_embeddings", "must be positive");
  r.beta_fast = f.opt_number("beta_fast", 32.0);
  r.beta_slow = f.opt_number("beta_slow", 1.0);
  r.mscale = f.opt_number("mscale", 1.0);
  r.mscale_all_dim = f.opt_number("mscale_all_dim", 0.0);
  if (f.has("attention_factor"))
    f.fail("attention_factor", "an explicit YaRN attention_factor is not supported");
  if (!f.opt_bool("truncate", true))
    f.fail("truncate", "YaRN without a truncated correction range is not supported");
  // transformers recomputes the factor as max_position_embeddings / original; other
  // implementations read `factor`. Refuse configs where the two disagree.
  double implied = static_cast<double>(max_position_embeddings) /
                   static_cast<double>(r.original_max_position_embeddings);
  if (std::fabs(implied - r.factor) > 1e-9 * r.factor)
    f.fail("factor", "YaRN factor " + std::to_string(r.factor) +
                         " disagrees with max_position_embeddings / original_max_position_embeddings = " +
                         std::to_string(implied));
  return r;
}

}  // namespace

RopeFields parse_rope_fields(const JsonFields& model, int64_t max_position_embeddings) {
  RopeFields out;
  if (auto rp = model.opt_object("rope_parameters")) {
    out.theta = rp->has("rope_theta") ? rp->req_number("rope_theta") : model.req_number("rope_theta");
    out.scaling = parse_scaling(*rp, max_position_embeddings);
  } else {
    out.theta = model.opt_number("rope_theta", 10000.0);
    if (auto rs = model.opt_object("rope_scaling")) out.scaling = parse_scaling(*rs, max_position_embeddings);
  }
  if (!(out.theta > 0)) model.fail("rope_theta", "must be positive");
  return out;
}

nlohmann::json rope_scaling_to_json(const RopeScaling& r) {
  if (r.type != "yarn") return nullptr;
  return {{"type", "yarn"},
          {"rope_type", "yarn"},
          {"factor", r.factor},
          {"original_max_position_embeddings", r.original_max_position_embeddings},
          {"beta_fast", r.beta_fast},
          {"beta_slow", r.beta_slow},
          {"mscale", r.mscale},
          {"mscale_all_dim", r.mscale_all_dim}};
}

}  // namespace kplan
