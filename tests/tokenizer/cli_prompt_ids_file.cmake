# `deepinfer generate --prompt-ids-file` gives exactly what --prompt-ids gives (commas, whitespace and a
# JSON array all work), and a bad id is an error naming the file.
set(model ${SRC}/models/tiny-v4-fp8)
execute_process(COMMAND ${BIN} generate --model ${model} --prompt-ids 5,6,7,8,9 --max-tokens 6
                RESULT_VARIABLE rc OUTPUT_VARIABLE direct ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "generate --prompt-ids failed: ${err}")
endif()
file(WRITE ${WORK}/ids_plain.txt "5 6\n7,8\t9\n")
file(WRITE ${WORK}/ids_json.txt "[5, 6, 7, 8, 9]")
foreach(f ids_plain.txt ids_json.txt)
  execute_process(COMMAND ${BIN} generate --model ${model} --prompt-ids-file ${WORK}/${f} --max-tokens 6
                  RESULT_VARIABLE rc OUTPUT_VARIABLE got ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT got STREQUAL direct)
    message(FATAL_ERROR "--prompt-ids-file ${f}: rc ${rc}, got '${got}', want '${direct}' ${err}")
  endif()
endforeach()
file(WRITE ${WORK}/ids_bad.txt "5 6 x7")
execute_process(COMMAND ${BIN} generate --model ${model} --prompt-ids-file ${WORK}/ids_bad.txt --max-tokens 2
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "ids_bad.txt: 'x7' is not a token id")
  message(FATAL_ERROR "a bad id must fail naming the file: rc ${rc}, ${err}")
endif()
