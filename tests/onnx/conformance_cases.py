"""The ONNX node conformance cases of the operators the importer supports: those it passes
(the include list of the conformance test) and, for each case it does not run, the reason."""


def _names(text: str) -> tuple[str, ...]:
    return tuple(f"test_{name}" for name in text.split())


# Every case of the supported operators that passes (forward, with the case's float32 tolerances).
PASSING = _names("""
    add add_bcast averagepool_1d_default averagepool_2d_ceil
    averagepool_2d_ceil_last_window_starts_on_pad averagepool_2d_default
    averagepool_2d_dilations averagepool_2d_pads averagepool_2d_pads_count_include_pad
    averagepool_2d_precomputed_pads averagepool_2d_precomputed_pads_count_include_pad
    averagepool_2d_precomputed_same_upper averagepool_2d_precomputed_strides
    averagepool_2d_same_lower averagepool_2d_same_upper averagepool_2d_strides
    averagepool_3d_default
    averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_False
    averagepool_3d_dilations_large_count_include_pad_is_0_ceil_mode_is_True
    averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_False
    averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_True
    averagepool_3d_dilations_small basic_conv_with_padding basic_conv_without_padding
    batchnorm_epsilon batchnorm_epsilon_training_mode batchnorm_example
    batchnorm_example_training_mode cast_DOUBLE_to_FLOAT cast_FLOAT_to_DOUBLE clip
    clip_default_inbounds clip_default_inbounds_expanded clip_default_max
    clip_default_max_expanded clip_default_min clip_default_min_expanded clip_example
    clip_example_expanded clip_expanded clip_inbounds clip_inbounds_expanded
    clip_min_greater_than_max clip_min_greater_than_max_expanded clip_outbounds
    clip_outbounds_expanded clip_splitbounds clip_splitbounds_expanded concat_1d_axis_0
    concat_1d_axis_negative_1 concat_2d_axis_0 concat_2d_axis_1 concat_2d_axis_negative_1
    concat_2d_axis_negative_2 concat_3d_axis_0 concat_3d_axis_1 concat_3d_axis_2
    concat_3d_axis_negative_1 concat_3d_axis_negative_2 concat_3d_axis_negative_3 constant
    constant_pad constant_pad_axes constant_pad_negative_axes conv_with_autopad_same
    conv_with_strides_and_asymmetric_padding conv_with_strides_no_padding
    conv_with_strides_padding div div_bcast div_example div_int32_trunc dropout_default
    dropout_default_mask dropout_default_mask_ratio dropout_default_old dropout_default_ratio
    dropout_random_old edge_pad elu elu_default elu_default_expanded_ver18 elu_example
    elu_example_expanded_ver18 elu_expanded_ver18 erf exp exp_example flatten_axis0
    flatten_axis1 flatten_axis2 flatten_axis3 flatten_default_axis flatten_negative_axis1
    flatten_negative_axis2 flatten_negative_axis3 flatten_negative_axis4 gather_0 gather_1
    gather_2d_indices gather_negative_indices gelu_default_1 gelu_default_1_expanded
    gelu_default_2 gelu_default_2_expanded gelu_tanh_1 gelu_tanh_1_expanded gelu_tanh_2
    gelu_tanh_2_expanded gemm_all_attributes gemm_alpha gemm_beta gemm_default_matrix_bias
    gemm_default_no_bias gemm_default_scalar_bias gemm_default_single_elem_vector_bias
    gemm_default_vector_bias gemm_default_zero_bias gemm_transposeA gemm_transposeB
    globalaveragepool globalaveragepool_precomputed globalmaxpool globalmaxpool_precomputed
    identity layer_normalization_2d_axis0 layer_normalization_2d_axis0_expanded
    layer_normalization_2d_axis0_expanded_ver18 layer_normalization_2d_axis1
    layer_normalization_2d_axis1_expanded layer_normalization_2d_axis1_expanded_ver18
    layer_normalization_2d_axis_negative_1 layer_normalization_2d_axis_negative_1_expanded
    layer_normalization_2d_axis_negative_1_expanded_ver18 layer_normalization_2d_axis_negative_2
    layer_normalization_2d_axis_negative_2_expanded
    layer_normalization_2d_axis_negative_2_expanded_ver18 layer_normalization_3d_axis0_epsilon
    layer_normalization_3d_axis0_epsilon_expanded
    layer_normalization_3d_axis0_epsilon_expanded_ver18 layer_normalization_3d_axis1_epsilon
    layer_normalization_3d_axis1_epsilon_expanded
    layer_normalization_3d_axis1_epsilon_expanded_ver18 layer_normalization_3d_axis2_epsilon
    layer_normalization_3d_axis2_epsilon_expanded
    layer_normalization_3d_axis2_epsilon_expanded_ver18
    layer_normalization_3d_axis_negative_1_epsilon
    layer_normalization_3d_axis_negative_1_epsilon_expanded
    layer_normalization_3d_axis_negative_1_epsilon_expanded_ver18
    layer_normalization_3d_axis_negative_2_epsilon
    layer_normalization_3d_axis_negative_2_epsilon_expanded
    layer_normalization_3d_axis_negative_2_epsilon_expanded_ver18
    layer_normalization_3d_axis_negative_3_epsilon
    layer_normalization_3d_axis_negative_3_epsilon_expanded
    layer_normalization_3d_axis_negative_3_epsilon_expanded_ver18 layer_normalization_4d_axis0
    layer_normalization_4d_axis0_expanded layer_normalization_4d_axis0_expanded_ver18
    layer_normalization_4d_axis1 layer_normalization_4d_axis1_expanded
    layer_normalization_4d_axis1_expanded_ver18 layer_normalization_4d_axis2
    layer_normalization_4d_axis2_expanded layer_normalization_4d_axis2_expanded_ver18
    layer_normalization_4d_axis3 layer_normalization_4d_axis3_expanded
    layer_normalization_4d_axis3_expanded_ver18 layer_normalization_4d_axis_negative_1
    layer_normalization_4d_axis_negative_1_expanded
    layer_normalization_4d_axis_negative_1_expanded_ver18 layer_normalization_4d_axis_negative_2
    layer_normalization_4d_axis_negative_2_expanded
    layer_normalization_4d_axis_negative_2_expanded_ver18 layer_normalization_4d_axis_negative_3
    layer_normalization_4d_axis_negative_3_expanded
    layer_normalization_4d_axis_negative_3_expanded_ver18 layer_normalization_4d_axis_negative_4
    layer_normalization_4d_axis_negative_4_expanded
    layer_normalization_4d_axis_negative_4_expanded_ver18 layer_normalization_default_axis
    layer_normalization_default_axis_expanded layer_normalization_default_axis_expanded_ver18
    leakyrelu leakyrelu_default leakyrelu_default_expanded leakyrelu_example
    leakyrelu_example_expanded leakyrelu_expanded logsoftmax_axis_0 logsoftmax_axis_0_expanded
    logsoftmax_axis_0_expanded_ver18 logsoftmax_axis_1 logsoftmax_axis_1_expanded
    logsoftmax_axis_1_expanded_ver18 logsoftmax_axis_2 logsoftmax_axis_2_expanded
    logsoftmax_axis_2_expanded_ver18 logsoftmax_default_axis logsoftmax_default_axis_expanded
    logsoftmax_default_axis_expanded_ver18 logsoftmax_example_1 logsoftmax_example_1_expanded
    logsoftmax_example_1_expanded_ver18 logsoftmax_large_number logsoftmax_large_number_expanded
    logsoftmax_large_number_expanded_ver18 logsoftmax_negative_axis
    logsoftmax_negative_axis_expanded logsoftmax_negative_axis_expanded_ver18 matmul_1d_1d
    matmul_1d_3d matmul_2d matmul_3d matmul_4d matmul_4d_1d matmul_bcast maxpool_1d_default
    maxpool_2d_ceil maxpool_2d_ceil_output_size_reduce_by_one maxpool_2d_default
    maxpool_2d_dilations maxpool_2d_pads maxpool_2d_precomputed_pads
    maxpool_2d_precomputed_same_upper maxpool_2d_precomputed_strides maxpool_2d_same_lower
    maxpool_2d_same_upper maxpool_2d_strides maxpool_3d_default maxpool_3d_dilations
    maxpool_3d_dilations_use_ref_impl maxpool_3d_dilations_use_ref_impl_large
    maxpool_with_argmax_2d_precomputed_pads maxpool_with_argmax_2d_precomputed_strides mul
    mul_bcast mul_example pow pow_bcast_array pow_bcast_scalar pow_example
    pow_types_float32_int32 pow_types_float32_int64 pow_types_float32_uint32
    pow_types_float32_uint64 pow_types_int32_float32 pow_types_int32_int32
    pow_types_int64_float32 pow_types_int64_int64 reciprocal reciprocal_example
    reduce_mean_default_axes_keepdims_example reduce_mean_default_axes_keepdims_random
    reduce_mean_do_not_keepdims_example reduce_mean_do_not_keepdims_random
    reduce_mean_keepdims_example reduce_mean_keepdims_random
    reduce_mean_negative_axes_keepdims_example reduce_mean_negative_axes_keepdims_random
    reduce_sum_default_axes_keepdims_example reduce_sum_default_axes_keepdims_random
    reduce_sum_do_not_keepdims_example reduce_sum_do_not_keepdims_random
    reduce_sum_empty_axes_input_noop reduce_sum_empty_axes_input_noop_example
    reduce_sum_empty_set reduce_sum_empty_set_non_reduced_axis_zero reduce_sum_keepdims_example
    reduce_sum_keepdims_random reduce_sum_negative_axes_keepdims_example
    reduce_sum_negative_axes_keepdims_random reflect_pad relu relu_expanded_ver18
    reshape_allowzero_reordered reshape_extended_dims reshape_negative_dim
    reshape_negative_extended_dims reshape_one_dim reshape_reduced_dims
    reshape_reordered_all_dims reshape_reordered_last_dims reshape_zero_and_negative_dim
    reshape_zero_dim shape shape_clip_end shape_clip_start shape_end_1 shape_end_negative_1
    shape_example shape_start_1 shape_start_1_end_2 shape_start_1_end_negative_1
    shape_start_greater_than_end shape_start_negative_1 sigmoid sigmoid_example slice
    slice_default_axes slice_default_steps slice_end_out_of_bounds slice_neg slice_neg_steps
    slice_negative_axes slice_start_out_of_bounds softmax_axis_0 softmax_axis_0_expanded
    softmax_axis_0_expanded_ver18 softmax_axis_1 softmax_axis_1_expanded
    softmax_axis_1_expanded_ver18 softmax_axis_2 softmax_axis_2_expanded
    softmax_axis_2_expanded_ver18 softmax_default_axis softmax_default_axis_expanded
    softmax_default_axis_expanded_ver18 softmax_example softmax_example_expanded
    softmax_example_expanded_ver18 softmax_large_number softmax_large_number_expanded
    softmax_large_number_expanded_ver18 softmax_negative_axis softmax_negative_axis_expanded
    softmax_negative_axis_expanded_ver18 split_1d_uneven_split_opset18
    split_2d_uneven_split_opset18 split_equal_parts_1d_opset13 split_equal_parts_1d_opset18
    split_equal_parts_2d split_equal_parts_2d_opset13 split_equal_parts_default_axis_opset13
    split_equal_parts_default_axis_opset18 split_variable_parts_1d_opset13
    split_variable_parts_1d_opset18 split_variable_parts_2d_opset13
    split_variable_parts_2d_opset18 split_variable_parts_default_axis_opset13
    split_variable_parts_default_axis_opset18 split_zero_size_splits_opset13
    split_zero_size_splits_opset18 sqrt sqrt_example squeeze squeeze_negative_axes sub sub_bcast
    sub_example tanh tanh_example training_dropout_zero_ratio training_dropout_zero_ratio_mask
    transpose_all_permutations_0 transpose_all_permutations_1 transpose_all_permutations_2
    transpose_all_permutations_3 transpose_all_permutations_4 transpose_all_permutations_5
    transpose_default unsqueeze_axis_0 unsqueeze_axis_1 unsqueeze_axis_2 unsqueeze_negative_axes
    unsqueeze_three_axes unsqueeze_two_axes unsqueeze_unsorted_axes wrap_pad
    isnan isinf isinf_negative isinf_positive neg neg_example not_2d not_3d not_4d
    and2d and3d and4d and_bcast3v1d and_bcast3v2d and_bcast4v2d and_bcast4v3d and_bcast4v4d
    or2d or3d or4d or_bcast3v1d or_bcast3v2d or_bcast4v2d or_bcast4v3d or_bcast4v4d
    xor2d xor3d xor4d xor_bcast3v1d xor_bcast3v2d xor_bcast4v2d xor_bcast4v3d xor_bcast4v4d
    instancenorm_epsilon instancenorm_example group_normalization_epsilon
    group_normalization_epsilon_expanded group_normalization_example
    group_normalization_example_expanded lstm_batchwise lstm_defaults lstm_with_initial_bias
""")

# Why the other cases are not run. All but RANDOM fail with a clear ONNXImportError.
FLEXFLOW_TYPES = "float32, float64, int32, int64 and bool"
INPUT_DTYPE = ("an input is int8, int16, an unsigned integer, float16, bfloat16, a float8 or "
               "float4 format, int4, uint4, int2 or uint2: not one of FlexFlow's data types "
               f"({FLEXFLOW_TYPES}), so no FlexFlow tensor can hold it")
OUTPUT_DTYPE = ("a cast to float16, bfloat16, a float8 or float4 format, int4, uint4, int2 or "
                f"uint2: not one of FlexFlow's data types ({FLEXFLOW_TYPES}), so no FlexFlow "
                "tensor can hold the result")
NOT_TENSORS = ("the input is a sequence of tensors (or an optional one): FlexFlow's values are "
               "tensors of one fixed shape and data type, and a sequence (a list of any length "
               "of tensors of any shapes) or an optional (which may hold nothing) is neither")
RANDOM = ("training-mode Dropout with a nonzero ratio: the expected output keeps the elements "
          "where numpy's legacy global generator, re-seeded with 0 for the call, drew at least "
          "the ratio (np.random.seed(0); np.random.uniform(size=x.shape) >= ratio), a stream "
          "the ONNX specification leaves to each runtime. FlexFlow's dropout draws its mask from "
          "a hash of (seed, step, element index), so that every split of a tensor drops the same "
          "elements and every step draws a new mask (re-seeding numpy's stream would drop the "
          "same elements at every step), and it drops only while the model trains, which these "
          "forward-only cases do not")

LSTM_VARIANTS = ("a reverse or bidirectional LSTM, or one with peepholes: the unrolled LSTM "
                 "runs forward, with the gates ONNX computes without peepholes (torch's "
                 "nn.LSTM has none)")

UNSUPPORTED = {
    LSTM_VARIANTS: _names("""
    lstm_bidirectional lstm_reverse lstm_with_peepholes
    """),
    INPUT_DTYPE: _names("""
    add_int16 add_int8 add_uint16 add_uint32 add_uint64 add_uint8 cast_BFLOAT16_to_FLOAT
    cast_FLOAT16_to_DOUBLE cast_FLOAT16_to_FLOAT cast_FLOAT16_to_FLOAT4E2M1
    cast_FLOAT16_to_FLOAT8E4M3FN cast_FLOAT16_to_FLOAT8E4M3FNUZ cast_FLOAT16_to_FLOAT8E5M2
    cast_FLOAT16_to_FLOAT8E5M2FNUZ cast_FLOAT16_to_INT2 cast_FLOAT16_to_INT4
    cast_FLOAT16_to_UINT2 cast_FLOAT16_to_UINT4 cast_FLOAT4E2M1_to_FLOAT
    cast_FLOAT4E2M1_to_FLOAT16 cast_FLOAT8E4M3FNUZ_to_FLOAT cast_FLOAT8E4M3FNUZ_to_FLOAT16
    cast_FLOAT8E4M3FN_to_FLOAT cast_FLOAT8E4M3FN_to_FLOAT16 cast_FLOAT8E5M2FNUZ_to_FLOAT
    cast_FLOAT8E5M2FNUZ_to_FLOAT16 cast_FLOAT8E5M2_to_FLOAT cast_FLOAT8E5M2_to_FLOAT16
    cast_INT2_to_FLOAT cast_INT2_to_FLOAT16 cast_INT2_to_INT8 cast_INT4_to_FLOAT
    cast_INT4_to_FLOAT16 cast_INT4_to_INT8 cast_UINT2_to_FLOAT cast_UINT2_to_FLOAT16
    cast_UINT2_to_UINT8 cast_UINT4_to_FLOAT cast_UINT4_to_FLOAT16 cast_UINT4_to_UINT8
    cast_e8m0_FLOAT16_to_FLOAT8E8M0 cast_e8m0_FLOAT8E8M0_to_FLOAT
    cast_e8m0_FLOAT8E8M0_to_FLOAT16 cast_no_saturate_FLOAT16_to_FLOAT8E4M3FN
    cast_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ cast_no_saturate_FLOAT16_to_FLOAT8E5M2
    cast_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ clip_default_int8_inbounds
    clip_default_int8_inbounds_expanded clip_default_int8_max clip_default_int8_max_expanded
    clip_default_int8_min clip_default_int8_min_expanded div_int16 div_int8 div_uint16
    div_uint32 div_uint64 div_uint8 isinf_float16 isnan_float16 maxpool_2d_uint8 mul_int16 mul_int8 mul_uint16 mul_uint32
    mul_uint64 mul_uint8 sub_int16 sub_int8 sub_uint16 sub_uint32 sub_uint64 sub_uint8
    """),
    OUTPUT_DTYPE: _names("""
    cast_DOUBLE_to_FLOAT16 cast_FLOAT_to_BFLOAT16 cast_FLOAT_to_FLOAT16 cast_FLOAT_to_FLOAT4E2M1
    cast_FLOAT_to_FLOAT8E4M3FN cast_FLOAT_to_FLOAT8E4M3FNUZ cast_FLOAT_to_FLOAT8E5M2
    cast_FLOAT_to_FLOAT8E5M2FNUZ cast_FLOAT_to_INT2 cast_FLOAT_to_INT4 cast_FLOAT_to_UINT2
    cast_FLOAT_to_UINT4 cast_e8m0_FLOAT_to_FLOAT8E8M0 cast_no_saturate_FLOAT_to_FLOAT8E4M3FN
    cast_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ cast_no_saturate_FLOAT_to_FLOAT8E5M2
    cast_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ
    """),
    NOT_TENSORS: _names("""
    identity_opt identity_sequence
    """),
    RANDOM: _names("""
    training_dropout training_dropout_default training_dropout_default_mask
    training_dropout_mask
    """),
}
