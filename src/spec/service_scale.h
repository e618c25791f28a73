// The service source's "scale" option (docs/service.md, "Echo or scale"): its declaration
// and the decision loop it makes (core/autoscale.h), asking the dispatcher through
// service/autoscale.h.
#pragma once

#include <memory>

#include "dataecho/core/autoscale.h"
#include "dataecho/service/service.h"
#include "dataecho/spec/schema.h"
#include "dataecho/spec/spec_reader.h"

namespace dataecho {

OptionDecl service_scale_option();

// The "scale" object of the service source `s` (absent: "fixed") as ScaleOptions.
ScaleOptions read_scale_options(SpecObject& s);

// The source's decision loop, null for "fixed". Refused with sharding "off" (a consumer
// reads the workers listed at its epoch's start, and each worker makes a whole pass).
std::shared_ptr<ScalePolicy> make_scale_policy(SpecObject& s,
                                               const service::ServiceSourceOptions& o);

}  // namespace dataecho
