# Finds LibTorch, tolerating several installs on one machine: Debian's libtorch-dev in /usr and
# pip's torch in a venv (CMAKE_PREFIX_PATH=$(python -c 'import torch;print(torch.utils.cmake_prefix_path)')),
# or the official LibTorch archive. Two hazards are handled here, once:
#  1. TorchConfig.cmake looks for libtorch.so with the system folders first, so with Debian's
#     package installed a pip build would link /usr/lib's libtorch 1.13 against 2.x headers. The
#     library is pinned to the install whose TorchConfig.cmake is used.
#  2. pip's torch ships fmt 12 headers in its include folder, while Debian's spdlog is built
#     against Debian's fmt 9. Targets see torch's include folder through a view without `fmt/`;
#     the one file that needs torch's fmt (the c10d headers use it) is compiled apart, see
#     SHOPLENS_TORCH_OWN_FMT_SOURCES in src/CMakeLists.txt.

function(_shoplens_torch_config_dir out)
  foreach(prefix IN LISTS CMAKE_PREFIX_PATH Torch_DIR)
    foreach(suffix "" "Torch" "share/cmake/Torch" "lib/cmake/Torch")
      if(EXISTS "${prefix}/${suffix}/TorchConfig.cmake")
        get_filename_component(dir "${prefix}/${suffix}" REALPATH)
        set(${out} "${dir}" PARENT_SCOPE)
        return()
      endif()
    endforeach()
  endforeach()
  set(${out} "" PARENT_SCOPE)
endfunction()

# Replaces the leading `from` of every entry of the list `var` by `to` (plain text, no regex:
# venv paths hold '.' and '+').
function(_shoplens_swap_prefix var from to)
  set(result "")
  string(LENGTH "${from}" n)
  foreach(entry IN LISTS ${var})
    string(FIND "${entry}" "${from}" at)
    if(at EQUAL 0)
      string(SUBSTRING "${entry}" ${n} -1 rest)
      set(entry "${to}${rest}")
    endif()
    list(APPEND result "${entry}")
  endforeach()
  set(${var} "${result}" PARENT_SCOPE)
endfunction()

_shoplens_torch_config_dir(_torch_config_dir)
if(_torch_config_dir)
  get_filename_component(_torch_prefix "${_torch_config_dir}/../../.." REALPATH)
  # TorchConfig.cmake finds each of its libraries as <name>_LIBRARY (c10_LIBRARY, TORCH_LIBRARY,
  # C10_CUDA_LIBRARY, ...): seed them all from the chosen install's lib folder.
  file(GLOB _torch_libs "${_torch_prefix}/lib/lib*.so")
  foreach(lib IN LISTS _torch_libs)
    get_filename_component(name "${lib}" NAME_WE)
    string(SUBSTRING "${name}" 3 -1 name)
    string(TOUPPER "${name}" upper)
    foreach(var "${name}_LIBRARY" "${upper}_LIBRARY")
      if(NOT ${var})
        set(${var} "${lib}" CACHE FILEPATH "${name} of the chosen LibTorch")
      endif()
    endforeach()
  endforeach()
  set(Torch_DIR "${_torch_config_dir}" CACHE PATH "TorchConfig.cmake folder" FORCE)
endif()

find_package(Torch REQUIRED)

# Every torch/c10 library linked must come from the install whose headers are used.
get_filename_component(_torch_prefix_real "${TORCH_INSTALL_PREFIX}" REALPATH)
if(EXISTS "${TORCH_INSTALL_PREFIX}/lib/libtorch.so")
  foreach(lib IN LISTS TORCH_LIBRARIES TORCH_LIBRARY c10_LIBRARY)
    get_filename_component(name "${lib}" NAME)
    if(IS_ABSOLUTE "${lib}" AND name MATCHES "^lib(torch|c10)")
      get_filename_component(real "${lib}" REALPATH)
      string(FIND "${real}" "${_torch_prefix_real}/" at)
      if(NOT at EQUAL 0)
        message(FATAL_ERROR "${lib} is not from the LibTorch whose headers are used (${TORCH_INSTALL_PREFIX}): "
                            "clear the build folder's CMakeCache.txt, or pass -D<name>_LIBRARY=${TORCH_INSTALL_PREFIX}/lib/...")
      endif()
    endif()
  endforeach()
endif()
message(STATUS "LibTorch ${Torch_VERSION} from ${TORCH_INSTALL_PREFIX}")

# The package that installed the LibTorch library, as "NAME VERSION" (empty: not a dpkg package).
# Debian's libtorch 1.13.1 ships headers (TORCH_VERSION) and a TorchConfigVersion.cmake that say
# 1.13.0: a source build takes its version from version.txt ("1.13.0a0" in the 1.13.1 release)
# unless PYTORCH_BUILD_VERSION is set, which only upstream's release builds do. `shoplens
# --version` and the records report the package's version (src/core/runtime_torch.cpp).
set(SHOPLENS_TORCH_PACKAGE "")
find_program(SHOPLENS_DPKG_QUERY dpkg-query)
if(SHOPLENS_DPKG_QUERY AND TORCH_LIBRARY)
  get_filename_component(_torch_library_real "${TORCH_LIBRARY}" REALPATH)
  execute_process(COMMAND ${SHOPLENS_DPKG_QUERY} -S "${_torch_library_real}" OUTPUT_VARIABLE _torch_owner
                  ERROR_QUIET RESULT_VARIABLE _rc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_rc EQUAL 0 AND _torch_owner MATCHES "^([^:, ]+)(:[A-Za-z0-9_-]+)?: ")
    set(_torch_package "${CMAKE_MATCH_1}")
    execute_process(COMMAND ${SHOPLENS_DPKG_QUERY} -W "-f=\${Version}" "${CMAKE_MATCH_1}${CMAKE_MATCH_2}"
                    OUTPUT_VARIABLE _torch_package_version ERROR_QUIET RESULT_VARIABLE _rc
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_rc EQUAL 0 AND _torch_package_version MATCHES "^[0-9A-Za-z.+~:-]+$")
      set(SHOPLENS_TORCH_PACKAGE "${_torch_package} ${_torch_package_version}")
      message(STATUS "LibTorch package: ${SHOPLENS_TORCH_PACKAGE}")
    endif()
  endif()
endif()

set(SHOPLENS_TORCH_OWN_FMT OFF)
set(SHOPLENS_TORCH_INCLUDE "${TORCH_INSTALL_PREFIX}/include")
# (A LibTorch installed in /usr shares the system's fmt: nothing to separate.)
get_filename_component(_torch_include_real "${SHOPLENS_TORCH_INCLUDE}" REALPATH)
if(EXISTS "${SHOPLENS_TORCH_INCLUDE}/fmt" AND NOT _torch_include_real IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES
   AND NOT _torch_include_real STREQUAL "/usr/include")
  set(SHOPLENS_TORCH_OWN_FMT ON)
  set(_view "${CMAKE_BINARY_DIR}/torch-include-without-fmt")
  file(MAKE_DIRECTORY "${_view}")
  file(GLOB _entries RELATIVE "${SHOPLENS_TORCH_INCLUDE}" "${SHOPLENS_TORCH_INCLUDE}/*")
  foreach(entry IN LISTS _entries)
    if(NOT entry STREQUAL "fmt" AND NOT EXISTS "${_view}/${entry}")
      file(CREATE_LINK "${SHOPLENS_TORCH_INCLUDE}/${entry}" "${_view}/${entry}" SYMBOLIC)
    endif()
  endforeach()
  foreach(target torch torch_cpu torch_cuda torch_library torch_cpu_library torch_cuda_library c10 c10_cuda)
    if(TARGET ${target})
      get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
      if(dirs)
        _shoplens_swap_prefix(dirs "${SHOPLENS_TORCH_INCLUDE}" "${_view}")
        set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${dirs}")
      endif()
    endif()
  endforeach()
  _shoplens_swap_prefix(TORCH_INCLUDE_DIRS "${SHOPLENS_TORCH_INCLUDE}" "${_view}")
endif()

# pip's libtorch.so exports its own copy of some std::filesystem functions (remove_all,
# current_path, ...) from an older libstdc++; a process resolves each symbol to the first library
# that defines it, so with libtorch.so ahead of libstdc++ in the load order our calls reach that
# copy, which crashes (remove_all jumps to a null pointer). Naming libstdc++ first among every
# binary's needed libraries makes the system's libstdc++ win.
add_link_options("LINKER:--push-state,--no-as-needed,-lstdc++,--pop-state")

# A preset that means a given LibTorch (torch2) must not quietly build against another one.
if(SHOPLENS_EXPECT_TORCH_MAJOR AND NOT Torch_VERSION MATCHES "^${SHOPLENS_EXPECT_TORCH_MAJOR}\\.")
  message(FATAL_ERROR "this preset expects LibTorch ${SHOPLENS_EXPECT_TORCH_MAJOR}.x but found ${Torch_VERSION}: "
                      "configure it through scripts/build.sh torch2, which points CMAKE_PREFIX_PATH at the venv's torch")
endif()
