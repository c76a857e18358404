# DeepSeek V4.1 end to end with the real V4 tokenizer: make-synthetic --preset tiny-text-v41 (hash data
# computed by the reference for that tokenizer), inspect validates it (the vision_config is named and
# ignored, the Engram tables' sizes printed), and generate turns a text prompt into text, greedy and
# deterministic (two runs give the same ids and text; a one-shot prefill gives the chunked one's ids).
set(model ${WORK}/tiny-text-v41)
file(REMOVE_RECURSE ${model})
execute_process(COMMAND ${BIN} make-synthetic --preset tiny-text-v41 --seed 1 --out ${model}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "wrote .*tiny-text-v41 \\(DeepSeek V4.1, seed 1\\)")
  message(FATAL_ERROR "make-synthetic failed (${rc}): ${out}${err}")
endif()
execute_process(COMMAND ${BIN} inspect ${model} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
foreach(want "model: DeepSeek V4.1, vocab 129280" "engram table layer 1: 4062 rows x 32 BF16"
             "engram table layer 3: 4152 rows x 32 BF16" "vision_config: 32 ViT layers"
             "matches tokenizer.json" "\nOK\n")
  string(FIND "${out}" "${want}" at)
  if(NOT rc EQUAL 0 OR at LESS 0)
    message(FATAL_ERROR "inspect (${rc}) lacks '${want}':\n${out}${err}")
  endif()
endforeach()
set(prompt "The capital of France is Paris. The capital of Italy is")
foreach(run 1 2)
  execute_process(COMMAND ${BIN} generate --model ${model} --prompt "${prompt}" --max-tokens 12 --chunk-size 5
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out${run} ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "generate --prompt failed (${rc}): ${out${run}}${err}")
  endif()
endforeach()
if(NOT out1 STREQUAL out2)
  message(FATAL_ERROR "greedy generate is not deterministic:\n${out1}\n---\n${out2}")
endif()
string(REGEX MATCH "(^|\n)([0-9]+(,[0-9]+)*)\n" ids "${out1}")
set(ids "${CMAKE_MATCH_2}")
string(REPLACE "," ";" id_list "${ids}")
list(LENGTH id_list n)
if(NOT n EQUAL 12)
  message(FATAL_ERROR "expected 12 generated ids, got '${ids}' in:\n${out1}")
endif()
# one-shot prefill (no --chunk-size): the same tokens as chunks of 5 (the n-gram history carried)
execute_process(COMMAND ${BIN} generate --model ${model} --prompt "${prompt}" --max-tokens 12
                RESULT_VARIABLE rc OUTPUT_VARIABLE out3 ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out3 STREQUAL out1)
  message(FATAL_ERROR "one-shot prefill gave\n${out3}\nchunks of 5 gave\n${out1}")
endif()
message(STATUS "tiny-text-v41: ${out1}")
