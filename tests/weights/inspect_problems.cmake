# `deepinfer inspect` on tiny-v4 weights under a config claiming 16 experts: must exit 1 and list the
# missing experts and the misshapen router. Args: -DDEEPINFER=<binary> -DMODEL=<tiny-v4 dir> -DWORK=<dir>
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
file(READ ${MODEL}/config.json config)
string(REPLACE "\"n_routed_experts\": 8" "\"n_routed_experts\": 16" config "${config}")
file(WRITE ${WORK}/config.json "${config}")
file(CREATE_LINK ${MODEL}/model.safetensors ${WORK}/model.safetensors SYMBOLIC)
execute_process(COMMAND ${DEEPINFER} inspect ${WORK} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "expected exit 1, got ${rc}\n${out}\n${err}")
endif()
foreach(want "16 routed experts" "PROBLEM missing tensor 'layers.0.ffn.experts.8.w1.weight'"
             "tensor 'layers.1.ffn.gate.weight': shape [8, 64], expected [16, 64]" "FAILED")
  string(FIND "${out}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "output lacks \"${want}\":\n${out}")
  endif()
endforeach()
