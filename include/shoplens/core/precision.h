// Compute precision and device choice: the two values every layer that runs a model shares
// (training, inference, find-batch, benchmarks), typed once where a config file or flag enters.
#pragma once

#include <string>

#include "shoplens/core/enum_names.h"

namespace shoplens {

enum class Precision { kFp32, kBf16, kFp16 };
inline constexpr EnumName<Precision> kPrecisionNames[] = {
    {Precision::kFp32, "fp32"}, {Precision::kBf16, "bf16"}, {Precision::kFp16, "fp16"}};
inline const char* precision_name(Precision precision) { return name_in(kPrecisionNames, precision, "fp32"); }

// auto: CUDA where it is usable, else the CPU.
enum class DeviceChoice { kAuto, kCpu, kCuda };
inline constexpr EnumName<DeviceChoice> kDeviceChoiceNames[] = {
    {DeviceChoice::kAuto, "auto"}, {DeviceChoice::kCpu, "cpu"}, {DeviceChoice::kCuda, "cuda"}};
inline const char* device_choice_name(DeviceChoice device) { return name_in(kDeviceChoiceNames, device, "auto"); }

}  // namespace shoplens
