#pragma once
// A model argument where users keep checkpoints: a path, a HuggingFace cache repo folder
// (models--ORG--NAME: its refs/main snapshot), or ORG/NAME looked up in the HuggingFace hub cache
// ($HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub). kplan downloads nothing: a name missing from the cache is an error
// that says so.
#include <filesystem>
#include <string>

namespace kplan::cli {

// The hub cache folder the environment names (it need not exist).
std::filesystem::path hf_hub_cache();

// `arg` as a path kplan can read: itself when it exists (a models--ORG--NAME folder becomes its
// snapshot), else ORG/NAME's snapshot in the hub cache. Throws kplan::Error naming `what`
// ("MODEL", "--draft") and, for a name, the cache folder searched.
std::string resolve_model_argument(const std::string& arg, const std::string& what);

}  // namespace kplan::cli
