// Precompiled header for the *_torch.cpp translation units.
#pragma once
#include <pch_light.h>
#include <torch/torch.h>
