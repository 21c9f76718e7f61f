# ddpsim_version: an interface target whose generated header names this build — the project
# version, and `git describe` of the source tree when it is a git checkout with git at hand.
# Read at configure time: a build from an exported tarball or without git says only the version.
set(DDPSIM_GIT_DESCRIBE "")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS "${PROJECT_SOURCE_DIR}/.git")
  execute_process(
    COMMAND "${GIT_EXECUTABLE}" describe --always --dirty --tags
    WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
    OUTPUT_VARIABLE DDPSIM_GIT_DESCRIBE
    OUTPUT_STRIP_TRAILING_WHITESPACE
    ERROR_QUIET
    RESULT_VARIABLE git_result)
  if(NOT git_result EQUAL 0)
    set(DDPSIM_GIT_DESCRIBE "")
  endif()
endif()
if(DDPSIM_GIT_DESCRIBE STREQUAL "")
  set(DDPSIM_VERSION_STRING "${PROJECT_VERSION}")
else()
  set(DDPSIM_VERSION_STRING "${PROJECT_VERSION} (git ${DDPSIM_GIT_DESCRIBE})")
endif()
configure_file("${CMAKE_CURRENT_LIST_DIR}/version.hpp.in" "${PROJECT_BINARY_DIR}/generated/ddpsim_version.hpp" @ONLY)
add_library(ddpsim_version INTERFACE)
target_include_directories(ddpsim_version INTERFACE "${PROJECT_BINARY_DIR}/generated")
