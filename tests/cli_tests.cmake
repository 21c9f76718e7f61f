# End-to-end tests of the ddpsim binary: each tests/cli/*.sh is one ctest test; exit 77 skips.
file(GLOB cli_scripts CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cli/*.sh)
list(FILTER cli_scripts EXCLUDE REGEX "/lib\\.sh$")
foreach(script IN LISTS cli_scripts)
  get_filename_component(name ${script} NAME_WE)
  add_test(NAME cli_${name}
           COMMAND bash ${script} $<TARGET_FILE:ddpsim> ${PROJECT_SOURCE_DIR} ${DDPSIM_SHARED_DATA})
  set_tests_properties(cli_${name} PROPERTIES SKIP_RETURN_CODE 77)
endforeach()

# End-to-end tests of ddptrain: tests/cli_ddptrain/*.sh, the same conventions.
if(DDPSIM_BUILD_TRAINER)
  file(GLOB trainer_scripts CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cli_ddptrain/*.sh)
  list(FILTER trainer_scripts EXCLUDE REGEX "/lib\\.sh$")
  foreach(script IN LISTS trainer_scripts)
    get_filename_component(name ${script} NAME_WE)
    add_test(NAME ddptrain_cli_${name}
             COMMAND bash ${script} $<TARGET_FILE:ddptrain> ${PROJECT_SOURCE_DIR} ${DDPSIM_SHARED_DATA})
    set_tests_properties(ddptrain_cli_${name} PROPERTIES SKIP_RETURN_CODE 77)
  endforeach()
endif()
