// The debug-asan preset's one difference for tests: AddressSanitizer replaces glibc's malloc
// (mallopt does nothing) and keeps freed blocks in quarantine beside its shadow memory, so what a
// sanitized process holds is not what the product's process holds. Tests about a process's memory
// skip there, and the ones that only use a CPU budget budget the tensors alone (process_check_args).
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace shoplens::testing {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif

// " --set find_batch.process_check=false" under AddressSanitizer, else nothing.
inline std::string process_check_args() { return kAddressSanitizer ? " --set find_batch.process_check=false" : ""; }

}  // namespace shoplens::testing

#define SKIP_WHERE_PROCESS_MEMORY_IS_NOT_THE_PRODUCTS()                                                        \
  if (::shoplens::testing::kAddressSanitizer)                                                                  \
  GTEST_SKIP() << "under AddressSanitizer a process's memory is the sanitizer's (quarantine, shadow, its own " \
                  "malloc), not the product's"
