#pragma once
// The walk after a verify pass: from the root, the target picks its next token from its own
// logits at the current node (argmax, or a sample at temperature > 0); if a child of the node
// carries that token the walk moves there and repeats, else it stops and the picked token
// becomes the next bonus token.
//
// Why sampling stays lossless: the tree is fixed before the target's randomness is drawn, and
// the logits at node i are exactly the target's distribution given the committed tokens plus
// i's path (the ancestor mask). So every token the walk emits — the accepted children and the
// final bonus — is one draw from the target's conditional given everything before it, which is
// AR sampling; the tree only decides how many of those draws one verify pass can serve.
#include <cstdint>
#include <vector>

#include "runtime/ddtree/draft_tree.h"
#include "runtime/ddtree/token_sampler.h"
#include "runtime/step_model.h"

namespace kplan {

struct WalkResult {
  std::vector<int32_t> accepted;  // tree indices from the root (index 0) down the matched path
  int32_t next_token = -1;        // the target's pick after the last accepted node
};

// `logits` [tree.size(), vocab] from the verify step.
WalkResult walk_tree(const DraftTree& tree, const Matrix& logits, TokenSampler& sampler);
// The same over a verify step's output (greedy walks read its device argmax ids when present).
WalkResult walk_tree(const DraftTree& tree, const StepOutput& verified, TokenSampler& sampler);

}  // namespace kplan
