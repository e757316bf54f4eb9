# Regenerates build_info.cpp on every build, rewriting it only when the commit changes,
# so `shoplens --version` names the commit it was built from without forcing relinks.
set(SHOPLENS_BUILD_INFO_CPP ${CMAKE_BINARY_DIR}/generated/build_info.cpp)
add_custom_target(shoplens_build_info
  COMMAND ${CMAKE_COMMAND}
          -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
          -DOUTPUT=${SHOPLENS_BUILD_INFO_CPP}
          -DVERSION=${PROJECT_VERSION}
          -P ${CMAKE_SOURCE_DIR}/cmake/WriteBuildInfo.cmake
  BYPRODUCTS ${SHOPLENS_BUILD_INFO_CPP}
  COMMENT "build info")
