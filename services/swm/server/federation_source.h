#pragma once
// The ports ClusterDirectory and LinkSource moved to the core
// (swm/core/federation_source.h), where PlacementService uses them; this
// header keeps the old include path working.

#include "swm/core/federation_source.h"
