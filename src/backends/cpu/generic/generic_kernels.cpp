// The generic kernel table: the scalar references of src/ops, for every type.
#include "backends/cpu/generic/generic_kernels.h"

#include "ops/quant_ref.h"

namespace cactus {

namespace {

void set(CpuKernels& t, DType type, DequantizeRowFn dequantize, QuantizeRowFn quantize, VecDotFn vec_dot) {
    const size_t i = static_cast<size_t>(type);
    t.dequantize_row[i] = dequantize;
    t.quantize_row[i] = quantize;
    t.vec_dot[i] = vec_dot;
}

}  // namespace

void register_generic_kernels(CpuKernels& t) {
    t.isa_name = "generic";
    set(t, DType::F32, ref::dequantize_row_f32, ref::quantize_row_f32, ref::vec_dot_f32);
    set(t, DType::F16, ref::dequantize_row_f16, ref::quantize_row_f16, ref::vec_dot_f16);
    set(t, DType::BF16, ref::dequantize_row_bf16, ref::quantize_row_bf16, ref::vec_dot_bf16);
    set(t, DType::Q4_0, ref::dequantize_row_q4_0, ref::quantize_row_q4_0, ref::vec_dot_q4_0);
    set(t, DType::Q4_1, ref::dequantize_row_q4_1, ref::quantize_row_q4_1, ref::vec_dot_q4_1);
    set(t, DType::Q5_0, ref::dequantize_row_q5_0, ref::quantize_row_q5_0, ref::vec_dot_q5_0);
    set(t, DType::Q5_1, ref::dequantize_row_q5_1, ref::quantize_row_q5_1, ref::vec_dot_q5_1);
    set(t, DType::Q8_0, ref::dequantize_row_q8_0, ref::quantize_row_q8_0, ref::vec_dot_q8_0);
    set(t, DType::Q8_1, ref::dequantize_row_q8_1, ref::quantize_row_q8_1, nullptr);
    set(t, DType::Q2_K, ref::dequantize_row_q2_k, ref::quantize_row_q2_k, ref::vec_dot_q2_k);
    set(t, DType::Q3_K, ref::dequantize_row_q3_k, ref::quantize_row_q3_k, ref::vec_dot_q3_k);
    set(t, DType::Q4_K, ref::dequantize_row_q4_k, ref::quantize_row_q4_k, ref::vec_dot_q4_k);
    set(t, DType::Q5_K, ref::dequantize_row_q5_k, ref::quantize_row_q5_k, ref::vec_dot_q5_k);
    set(t, DType::Q6_K, ref::dequantize_row_q6_k, ref::quantize_row_q6_k, ref::vec_dot_q6_k);
    set(t, DType::Q8_K, ref::dequantize_row_q8_k, ref::quantize_row_q8_k, nullptr);
}

}  // namespace cactus
