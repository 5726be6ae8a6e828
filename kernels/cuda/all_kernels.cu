// The one translation unit nvcc compiles: every kernel of docs/kernels.md in
// one fatbin (and one PTX module), without relocatable device code.
#include "elementwise.cu"
#include "matmul.cu"
#include "matmul_tensor_core.cu"
#include "matmul_int4.cu"
#include "matmul_int4_decode.cu"
#include "matmul_int8_q8.cu"
#include "rowwise.cu"
#include "transformer.cu"
#include "attention.cu"
#include "attention_flash.cu"
#include "sampling.cu"
#include "logits_process.cu"
