# The Python package's tests: real torch on CPU and real Gloo processes, each script one ctest
# test run by the python3 the module was built for, importing the package from the build tree.
# A python3 without torch skips the torch tests (exit 77), and one without a CUDA device test_cuda.
set(python_tests scheduler bad_input sampler gradient tracer interference simulator notebook plots decoder unit_jitter zero1_script cuda)
foreach(name IN LISTS python_tests)
  add_test(NAME py_${name} COMMAND ${Python_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/tests/test_${name}.py)
  set_tests_properties(py_${name} PROPERTIES
    SKIP_RETURN_CODE 77
    ENVIRONMENT "PYTHONPATH=${PROJECT_BINARY_DIR}/python;DDPTRAIN=$<TARGET_FILE:ddptrain>;DDPSIM=$<TARGET_FILE:ddpsim>;OMP_NUM_THREADS=1")
endforeach()
# Their bounds hold for timings taken on a machine the other tests leave alone.
set_tests_properties(py_tracer py_unit_jitter PROPERTIES RUN_SERIAL ON)
