#pragma once
// The proto translation moved to the core (swm/core/convert.h: no gRPC, used
// by PlacementService and CODEF's simulate mode); this header keeps the old
// include path working.

#include "swm/core/convert.h"
