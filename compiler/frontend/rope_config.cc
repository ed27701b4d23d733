#include "compiler/frontend/rope_config.h"

#include <cmath>
#include <optional>

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

// transformers' partial_rotary_factor (RoPE on a leading fraction of each head): kplan rotates
// whole heads, so only 1 is accepted. It sits at the top level (transformers 4) or inside
// rope_parameters (transformers 5).
void refuse_partial_rotary(const JsonFields& f) {
  if (f.has("partial_rotary_factor") && f.req_number("partial_rotary_factor") != 1.0)
    f.fail("partial_rotary_factor", "partial rotary embeddings are not supported (RoPE on the whole head only), got " +
                                        std::to_string(f.req_number("partial_rotary_factor")));
}

// An explicit amplitude must be a positive finite number.
double attention_factor_of(const JsonFields& f) {
  const double a = f.req_number("attention_factor");
  if (!(a > 0.0) || !std::isfinite(a))
    f.fail("attention_factor", "must be a positive number, got " + std::to_string(a));
  return a;
}

RopeScaling parse_scaling(const JsonFields& f, int64_t max_position_embeddings) {
  std::string type_key;
  std::string type = rope_type_of(f, &type_key);
  RopeScaling r;
  refuse_partial_rotary(f);
  if (type == "default") {
    // transformers' default RoPE has no amplitude: refuse one rather than drop it.
    if (f.has("attention_factor") && attention_factor_of(f) != 1.0)
      f.fail("attention_factor", "an attention_factor other than 1 needs rope type yarn");
    return r;
  }
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
  // Absent is 0 for both, as transformers reads them (None): the amplitude is the
  // mscale / mscale_all_dim ratio only when both are given and non-zero, else 1 + 0.1 ln(factor).
  r.mscale = f.opt_number("mscale", 0.0);
  r.mscale_all_dim = f.opt_number("mscale_all_dim", 0.0);
  // transformers' _compute_yarn_parameters: an explicit attention_factor wins over the one
  // derived from mscale / mscale_all_dim.
  if (f.has("attention_factor")) r.attention_factor = attention_factor_of(f);
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
  refuse_partial_rotary(model);
  // A dict's own rope_theta (transformers 5 writes it there, and exposes the same dict as
  // rope_scaling) is the base; a different top-level rope_theta beside it is refused rather
  // than one of them silently picked (a drafter whose base is off by 100x still runs, and
  // accepts nothing).
  auto theta_of = [&](const JsonFields& dict, std::optional<double> fallback) {
    if (!dict.has("rope_theta")) return fallback ? *fallback : model.req_number("rope_theta");
    const double t = dict.req_number("rope_theta");
    if (model.has("rope_theta") && model.req_number("rope_theta") != t)
      model.fail("rope_theta", std::to_string(model.req_number("rope_theta")) + " disagrees with " +
                                   dict.field_path("rope_theta") + " " + std::to_string(t));
    return t;
  };
  if (auto rp = model.opt_object("rope_parameters")) {
    out.theta = theta_of(*rp, std::nullopt);
    out.scaling = parse_scaling(*rp, max_position_embeddings);
  } else if (auto rs = model.opt_object("rope_scaling")) {
    out.theta = theta_of(*rs, model.opt_number("rope_theta", 10000.0));
    out.scaling = parse_scaling(*rs, max_position_embeddings);
  } else {
    out.theta = model.opt_number("rope_theta", 10000.0);
  }
  if (!(out.theta > 0)) model.fail("rope_theta", "must be positive");
  return out;
}

nlohmann::json rope_scaling_to_json(const RopeScaling& r) {
  if (r.type != "yarn") return nullptr;
  nlohmann::json j = {{"type", "yarn"},
          {"rope_type", "yarn"},
          {"factor", r.factor},
          {"original_max_position_embeddings", r.original_max_position_embeddings},
          {"beta_fast", r.beta_fast},
          {"beta_slow", r.beta_slow},
          {"mscale", r.mscale},
          {"mscale_all_dim", r.mscale_all_dim}};
  if (r.attention_factor) j["attention_factor"] = *r.attention_factor;
  return j;
}

}  // namespace kplan
