// The adaptive mode of `echo` (include/dataecho/ops/echo.h), internal to src/ops:
// make_echo validates the options (validate_echo_options) and calls it.
#pragma once

#include "dataecho/ops/echo.h"

namespace dataecho {

DatasetPtr make_adaptive_echo(DatasetPtr input, const EchoOptions& options);

}  // namespace dataecho
