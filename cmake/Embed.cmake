# ddpsim_embed(TARGET INPUT SYMBOL): compiles INPUT into TARGET as the header
# embedded_<SYMBOL>.hpp (see embed_text.cmake), regenerated whenever INPUT changes.
function(ddpsim_embed target input symbol)
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/embedded")
  set(output "${dir}/embedded_${symbol}.hpp")
  add_custom_command(
    OUTPUT "${output}"
    COMMAND ${CMAKE_COMMAND} -E make_directory "${dir}"
    COMMAND ${CMAKE_COMMAND} -DINPUT=${input} -DOUTPUT=${output} -DSYMBOL=${symbol}
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_text.cmake
    DEPENDS "${input}" "${PROJECT_SOURCE_DIR}/cmake/embed_text.cmake"
    COMMENT "Embedding ${input}")
  target_sources(${target} PRIVATE "${output}")
  target_include_directories(${target} PRIVATE "${dir}")
endfunction()
