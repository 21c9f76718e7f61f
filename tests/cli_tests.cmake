# End-to-end tests: each DIR/*.sh is one ctest test, called as `script.sh BINARY SOURCE_DIR
# SHARED_DATA_DIR`; exit 77 skips. tests/cli drives ddpsim, tests/cli_ddptrain ddptrain.
function(ddpsim_cli_tests dir binary prefix)
  file(GLOB scripts CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/*.sh)
  list(FILTER scripts EXCLUDE REGEX "/lib\\.sh$")
  foreach(script IN LISTS scripts)
    get_filename_component(name ${script} NAME_WE)
    add_test(NAME ${prefix}${name} COMMAND bash ${script} $<TARGET_FILE:${binary}> ${PROJECT_SOURCE_DIR} ${DDPSIM_SHARED_DATA})
    set_tests_properties(${prefix}${name} PROPERTIES SKIP_RETURN_CODE 77)
    # A test that compares measured CPU timings with predictions must have the cores to itself.
    if(name MATCHES "roundtrip")
      set_tests_properties(${prefix}${name} PROPERTIES RUN_SERIAL TRUE)
    endif()
    # Timings under a sanitizer say little about the tool's accuracy; tests check only the
    # pipeline there.
    if(DDPSIM_SANITIZE)
      set_tests_properties(${prefix}${name} PROPERTIES ENVIRONMENT DDPSIM_TEST_SANITIZED=1)
    endif()
  endforeach()
endfunction()

if(TARGET ddpsim)
  ddpsim_cli_tests(cli ddpsim cli_)
endif()
if(DDPSIM_BUILD_TRAINER)
  ddpsim_cli_tests(cli_ddptrain ddptrain ddptrain_cli_)
endif()
