#pragma once
// C++ entry points of the C API for in-process tools that make a plan in memory (e.g. `kplan run`
// over a checkpoint directory): the plan is handed over as it is, with no file written and no
// weight copied (its weights may be views of a mapped checkpoint, kept alive by Plan::backing).
// Everything after the handle is the C API (kplan/kplan.h). Not part of the public C folder.
#include <memory>
#include <string>

#include "kplan/kplan.h"
#include "schemas/plan_model.h"

// Wraps `plan` as a kplan_plan (closed with kplan_plan_close). A plan with launches is validated
// as kplan_plan_open validates a file's; `source` names it in messages.
kplan_status kplan_plan_adopt(std::shared_ptr<const kplan::plan::Plan> plan, const std::string& source,
                              kplan_plan** out);
