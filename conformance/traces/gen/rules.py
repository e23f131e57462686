"""rules.py - the rule table: every rule of the driver contract's sections 2-8 (docs/contract.md)
as one row. gen/corpus.py generates the traces that exercise each rule along every variant axis
the row names, checks that each (rule, axis) has at least one trace (or a stated gap), and writes
the table's report (the rule map of traces/README.md).

A row: id; sec (the contract section: "2", "3", ..., "8.12"); text (the rule, as its traces cite
it); entries (the entry points where it applies); status (what a driver returns when the rule is
broken); side (input, output, both, none: which side of a call the rule constrains); axes (the
variant axes that apply, AXES below); hand (hand-written traces that pin it); gaps (axis -> why no
trace can exercise it yet)."""

# The variant axes (conformance issue 10, section 1).
AXES = {
    "side": ("side", "stated for inputs and outputs alike: each side tested (roles and their direction, "
                     "offsets/lengths on token arguments, type/scale/zero-point agreement across directions, dims)"),
    "handle": ("handle kind", "every entry point given every wrong kind: a token where an event goes, an event "
                              "where a token goes, a prepared model, a client, 0, a released one, another "
                              "client's, another device's, small literals, neighbours of live values"),
    "entry": ("entry point", "every entry point that takes the argument: prepare_model, execute and "
                             "execute_async, copy_from, copy_to (8.2), allocate"),
    "after_failure": ("after failure", "the rule holds after a failed synchronous or asynchronous execution, "
                                       "a failed copy, a fault plan with invalid calls interleaved"),
    "counts": ("past a size", "slot reuse hundreds and thousands of times (generation wrap), handle tables grown "
                              "past a chunk and shrunk, many clients and events"),
    "geometry": ("pool geometry", "every pool kind's negative cases, MMAP_FD windows inside larger files at "
                                  "unaligned offsets, offsets and lengths that wrap"),
    "shared_pool": ("shared pools", "outputs shorter than their pool, several outputs in one pool, the bytes "
                                    "outside each output checked untouched"),
    "numerics": ("numerics", "every binary op with broadcasting of the first, the second and both operands, "
                             "every axis (negative too) of SOFTMAX and CONCATENATION, every fused activation, "
                             "NaN and infinities in every float field that takes one"),
    "leaks": ("leak reports", "leak reports of buffers resized by executions and copies, uninitialized by "
                              "failures, never written; events waited or not"),
    "predictability": ("8.12", "1,000 handles of each kind (clients, prepared models, tokens, events), live and "
                               "churned through one slot, judged with collect/expect_unpredictable"),
}
AXIS_ORDER = list(AXES)

ALL_CALLS = ["close_client", "prepare_model", "release_prepared_model", "allocate", "copy_to", "copy_from",
             "free_buffer", "execute", "execute_async", "wait_event"]


class Rule:
    def __init__(self, rid, sec, text, entries, status, side, axes=(), hand=(), gaps=None, note="", partial=None):
        self.id, self.sec, self.text = rid, sec, text
        self.entries, self.status, self.side = list(entries), status, side
        self.axes, self.hand = list(axes), list(hand)
        self.gaps = dict(gaps or {})        # axis -> why no trace exercises it
        self.partial = dict(partial or {})  # axis -> what part of it no trace can exercise
        self.note = note
        for a in self.axes:
            assert a in AXES, (rid, a)
        for a in list(self.gaps) + list(self.partial):
            assert a in self.axes, (rid, a)

    def cite(self):
        return "SPEC %s: %s" % (self.sec, self.text)

    def anchor(self):
        return "s" + self.sec


_rows = [
    # ---- 2. Memory pools ----
    Rule("2.kinds", "2", "ASHMEM, MMAP_FD and HARDWARE_BUFFER_BLOB pools are supported in every use",
         ["prepare_model", "execute", "execute_async", "copy_from", "copy_to"], "NONE", "both",
         ["entry", "side", "geometry"],
         ["pools/ashmem_request_roundtrip", "pools/mmap_fd_offset_request", "pools/blob_request_and_copies",
          "pools/constant_pools_all_kinds", "copy/copy_to_mmap_fd_at_offset"]),
    Rule("2.hwb_io_only", "2", "a non-BLOB HARDWARE_BUFFER is allowed only as an execution input or output: in a "
         "model's pools (referenced or not) or in copy_to/copy_from it is INVALID_ARGUMENT",
         ["prepare_model", "copy_from", "copy_to", "execute", "execute_async"], "INVALID_ARGUMENT", "both",
         ["entry", "side"],
         ["pools/hardware_buffer_execution_io", "pools/hardware_buffer_rejected_in_copies_and_model"]),
    Rule("2.validate", "2", "a pool is validated before it is mapped: fd >= 0 and open, size > 0, offset+size "
         "inside the file, prot only READ/WRITE bits, kind known; else INVALID_ARGUMENT",
         ["prepare_model", "execute", "execute_async", "copy_from", "copy_to"], "INVALID_ARGUMENT", "both",
         ["entry", "side", "geometry"],
         ["pools/negative_fd_rejected", "pools/closed_fd_rejected", "pools/zero_size_rejected",
          "pools/past_end_rejected", "pools/offset_overflow_rejected", "pools/prot_exec_rejected",
          "pools/unknown_kind_rejected", "pools/pipe_fd_rejected"]),
    Rule("2.unmappable", "2", "a valid pool the driver cannot map is GENERAL_FAILURE naming the pool",
         ["prepare_model", "execute", "execute_async", "copy_from", "copy_to"], "GENERAL_FAILURE", "both",
         ["entry"], [],
         {"entry": "the trace format cannot make a valid descriptor that cannot be mapped (a pipe or a "
                   "character device fails the range check first); runtime unit tests cover it"}),
    Rule("2.const_range", "2", "CONSTANT_COPY and CONSTANT_REFERENCE offsets/lengths outside their storage "
         "(operand_values, the pool) are INVALID_ARGUMENT at prepare",
         ["prepare_model"], "INVALID_ARGUMENT", "none", ["geometry"],
         ["pools/constant_copy_out_of_range", "pools/constant_reference_out_of_range",
          "pools/constant_pools_all_kinds"]),
    Rule("2.arg_range", "2", "a request argument on a normal pool lies inside the pool (offset+length)",
         ["execute", "execute_async"], "INVALID_ARGUMENT", "both", ["side", "entry", "geometry"],
         ["pools/request_arg_bounds"]),
    Rule("2.arg_length", "2", "a non-zero request argument length equals the byte size of its (combined) dims",
         ["execute", "execute_async"], "INVALID_ARGUMENT", "both", ["side", "entry"],
         ["pools/request_arg_length_matches_dims"]),
    Rule("2.token_arg", "2", "a request argument on a token pool has offset 0 and length 0",
         ["execute", "execute_async"], "INVALID_ARGUMENT", "both", ["side", "entry"],
         ["pools/token_arg_offset_length_zero"]),
    # ---- 3. Memory domains ----
    Rule("3.alloc_needs", "3", "allocate needs at least one prepared model and one role",
         ["allocate"], "INVALID_ARGUMENT", "none", [], ["allocate/needs_prepared_and_role"]),
    Rule("3.alloc_prepared", "3", "every prepared handle given to allocate is valid and owned by this client, "
         "also one that no role refers to",
         ["allocate"], "INVALID_ARGUMENT", "input", ["handle"], ["allocate/prepared_handles_validated"]),
    Rule("3.alloc_index", "3", "a role's model_index and io_index are in range", ["allocate"],
         "INVALID_ARGUMENT", "both", ["side"], ["allocate/indexes_in_range"]),
    Rule("3.alloc_probability", "3", "a role's probability is 0 < p <= 1 (NaN invalid)", ["allocate"],
         "INVALID_ARGUMENT", "both", ["side", "numerics"], ["allocate/probability_range"]),
    Rule("3.alloc_duplicate", "3", "no (model, input|output, io_index) twice; the same prepared handle listed "
         "twice counts as the same model", ["allocate"], "INVALID_ARGUMENT", "both", ["side"],
         ["allocate/duplicate_roles_rejected", "allocate/identical_models_are_distinct"]),
    Rule("3.alloc_agree", "3", "all role operands agree on type, scale and zero point", ["allocate"],
         "INVALID_ARGUMENT", "both", ["side"], ["allocate/role_operands_agree"]),
    Rule("3.alloc_dims", "3", "the dims of desc and of every role operand combine", ["allocate"],
         "INVALID_ARGUMENT", "both", ["side"],
         ["allocate/dims_must_combine", "allocate/combine_zero_axis_takes_other",
          "allocate/combine_roles_complete_each_other", "allocate/combine_unknown_rank",
          "allocate/combine_zero_both_sides_stays_unknown"]),
    Rule("3.alloc_scalar", "3", "a scalar role takes no dims", ["allocate"], "INVALID_ARGUMENT", "both", ["side"],
         ["allocate/scalar_role_takes_no_dims"],
         partial={"side": "no v1 operation produces a scalar, so no model has a scalar output role: the input "
                          "side only"}),
    Rule("3.alloc_unservable", "3", "an allocation the driver cannot serve is GENERAL_FAILURE or "
         "RESOURCE_EXHAUSTED_*, never a crash", ["allocate"], "GENERAL_FAILURE", "none", ["after_failure"],
         ["allocate/unservable_allocation_fails_cleanly", "faults/mem_limit_persistent_vs_transient",
          "faults/execution_growing_over_mem_limit", "faults/alloc_fail_is_transient"]),
    Rule("3.copy_from", "3", "copy_from: dims have no 0, combine with the initial dims, may be empty only when "
         "those are fully known; the source size equals their byte size; success initializes the buffer with "
         "combine(initial, dims)", ["copy_from"], "INVALID_ARGUMENT", "input", ["geometry", "after_failure"],
         ["copy/copy_from_dims_rules", "copy/copy_from_size_must_match", "copy/roundtrip_known_buffer",
          "dynamic/copy_from_resizes"]),
    Rule("3.copy_from_failure", "3", "any copy_from failure leaves the buffer uninitialized", ["copy_from"],
         "INVALID_ARGUMENT", "input", ["after_failure", "entry"],
         ["copy/copy_from_failure_uninitializes", "faults/copy_fail_on_copy_from"]),
    Rule("3.copy_to", "3", "copy_to: when the current dims are fully known the destination size equals their "
         "byte size (INVALID_ARGUMENT), checked before initialization; an uninitialized buffer is "
         "GENERAL_FAILURE", ["copy_to"], "INVALID_ARGUMENT", "output", ["after_failure", "geometry"],
         ["copy/copy_to_size_checked_before_init", "copy/copy_to_size_rules_initialized",
          "copy/copy_to_uninitialized_unknown_dims", "faults/copy_fail_on_copy_to"]),
    Rule("3.dynamic", "3", "a buffer of dims not fully known takes its size from copy_from or from the "
         "execution that writes it; successive executions resize it", ["copy_from", "execute", "execute_async"],
         "NONE", "output", ["entry", "leaks"],
         ["dynamic/size_from_execution", "dynamic/successive_executions_resize", "dynamic/unknown_rank_takes_rank",
          "dynamic/copy_from_then_execution_resize", "dynamic/copy_from_resizes",
          "dynamic/resize_leaves_other_buffer_intact", "dynamic/output_read_back_as_input"]),
    Rule("3.fixed_dims", "3", "a buffer with fully known dims that an execution would write with other dims: "
         "GENERAL_FAILURE, never OUTPUT_INSUFFICIENT_SIZE", ["execute", "wait_event"], "GENERAL_FAILURE",
         "output", ["entry", "after_failure"],
         ["dynamic/fixed_dims_not_resized", "shapes/device_output_never_insufficient",
          "deinit/async_failure_uninitializes_output"]),
    # ---- 4. Execution ----
    Rule("4.counts", "4", "the request's argument counts equal the model's", ["execute", "execute_async"],
         "INVALID_ARGUMENT", "both", ["side", "entry"],
         ["execute/argument_counts", "deinit/count_mismatch_uninitializes_output"]),
    Rule("4.pools_valid", "4", "every request pool is valid, also one no argument uses",
         ["execute", "execute_async"], "INVALID_ARGUMENT", "both", ["entry", "geometry"],
         ["pools/unused_invalid_pools_rejected"]),
    Rule("4.token_valid", "4", "a token pool's token is valid for this client", ["execute", "execute_async"],
         "INVALID_ARGUMENT", "both", ["handle", "side", "entry"],
         ["clients/token_bound_to_its_client", "clients/uninitialized_token_of_other_client"]),
    Rule("4.role", "4", "a token argument's use (this prepared model, input or output, this index) is one of "
         "the buffer's roles, checked before initialization", ["execute", "execute_async"], "INVALID_ARGUMENT",
         "both", ["side", "entry"],
         ["execute/role_checked", "execute/role_before_initialization", "execute/role_on_second_prepared_model",
          "execute/role_survives_release"]),
    Rule("4.init", "4", "a token input must be initialized, else GENERAL_FAILURE", ["execute", "execute_async"],
         "GENERAL_FAILURE", "input", ["entry", "after_failure"],
         ["execute/role_before_initialization", "deinit/uninitialized_input_uninitializes_output"]),
    Rule("4.alias", "4", "a token used as an output appears nowhere else in the request; the same token as two "
         "inputs is fine", ["execute", "execute_async"], "INVALID_ARGUMENT", "both", ["side", "entry"],
         ["execute/output_token_alias_rejected", "execute/same_token_two_inputs"]),
    Rule("4.token_dims", "4", "dims given on a token argument combine with the buffer's dims; unspecified "
         "output dims are allowed", ["execute", "execute_async"], "INVALID_ARGUMENT", "both", ["side", "entry"],
         ["execute/token_arg_dims_combine", "execute/unspecified_output_dims"]),
    Rule("4.arg_dims", "4", "an argument's dims combine with the model operand's; input dims end fully known; a "
         "scalar argument takes no dims", ["execute", "execute_async"], "INVALID_ARGUMENT", "both",
         ["side", "entry"], ["pools/request_arg_length_matches_dims", "execute/unspecified_output_dims"],
         {}, "what the dims of a normal-pool argument must be follows from SPEC 2's \"combined dims\""),
    Rule("4.async_validates", "4", "execute_async validates the request as execute does: a failure returns at "
         "once and no event is made", ["execute_async"], "INVALID_ARGUMENT", "both", ["entry", "after_failure"],
         ["async/validation_failure_makes_no_event"]),
    Rule("4.wait", "4", "wait_event fills the shapes and timing and returns the execution's status, consuming "
         "the event: a second wait is INVALID_ARGUMENT", ["wait_event"], "INVALID_ARGUMENT", "output",
         ["after_failure", "handle", "counts"],
         ["async/wait_returns_status_shapes_results", "async/second_wait_rejected", "concurrency/racing_waits_consume_the_event_once",
          "async/many_events_reverse_order", "async/timed_out_wait_keeps_event"]),
    Rule("4.close_in_flight", "4", "close_client waits for its in-flight executions or lets them finish; it never "
         "frees memory under them", ["close_client"], "NONE", "none", ["after_failure"],
         ["async/close_client_with_execution_in_flight", "clients/close_client_kills_its_handles"]),
    Rule("4.insufficient", "4", "outputs on normal pools that are too small: OUTPUT_INSUFFICIENT_SIZE, with a "
         "shape for every output and is_sufficient = 0 exactly on the short ones",
         ["execute", "wait_event"], "OUTPUT_INSUFFICIENT_SIZE", "output", ["side", "entry", "shared_pool"],
         ["shapes/both_outputs_short", "shapes/second_output_short", "shapes/first_output_short"]),
    Rule("4.success", "4", "on success: NONE, a shape for every output, device outputs initialized with the "
         "produced dims", ["execute", "wait_event"], "NONE", "output", ["entry", "shared_pool"],
         ["execute/success_shape_for_every_output", "execute/uninitialized_output_accepted",
          "execute/device_output_feeds_next_execution"]),
    Rule("4.failure_results", "4", "on every other failure: no shapes, timing UINT64_MAX, and every device output "
         "of the request becomes uninitialized", ["execute", "execute_async", "wait_event"], "any", "output",
         ["after_failure", "entry", "side"],
         ["deinit/invalid_argument_uninitializes_output", "deinit/uninitialized_input_uninitializes_output",
          "deinit/count_mismatch_uninitializes_output",
          "deinit/shape_error_uninitializes_output", "deinit/failure_leaves_inputs_alone",
          "deinit/async_failure_uninitializes_output", "faults/kernel_fail_then_recovers"]),
    Rule("4.kernel_failure", "4", "a kernel that reports failure: GENERAL_FAILURE with its message",
         ["execute", "wait_event"], "GENERAL_FAILURE", "none", ["entry", "after_failure"],
         ["faults/kernel_fail_then_recovers", "faults/kernel_fail_async", "faults/combined_plan"]),
    # ---- 5. Clients, tokens, security ----
    Rule("5.token_bound", "5", "a token is bound to the client that allocated it: any use by another client is "
         "INVALID_ARGUMENT, never access", ["copy_to", "copy_from", "free_buffer", "execute", "execute_async"],
         "INVALID_ARGUMENT", "both", ["handle"],
         ["clients/token_bound_to_its_client", "clients/uninitialized_token_of_other_client",
          "clients/foreign_calls_leave_buffer_alone"]),
    Rule("5.dead", "5", "a handle or token after its release (free_buffer, release, a consumed event, "
         "close_client) or never issued (0, another device's) is INVALID_ARGUMENT", ALL_CALLS,
         "INVALID_ARGUMENT", "both", ["handle", "counts"],
         ["tokens/freed_token_rejected", "tokens/zero_token_rejected", "tokens/never_issued_value_rejected",
          "clients/close_client_kills_its_handles", "basic/unissued_handles_rejected"]),
    Rule("5.unguessable", "5", "a forged value is accepted with probability at most 2^-32 per try: small literals "
         "and neighbours of live values are refused", ALL_CALLS, "INVALID_ARGUMENT", "both", ["handle"],
         ["tokens/mac_bit_flip_rejected", "tokens/slot_and_generation_flip_rejected",
          "basic/close_client_checks_its_handle", "basic/client_handles_not_neighbours"]),
    Rule("5.stale_slot", "5", "a freed slot's old handle stays dead when the slot is reused, however often",
         ALL_CALLS, "INVALID_ARGUMENT", "both", ["counts"],
         ["tokens/reused_slot_rejects_old_token", "tokens/prepared_handles_validated",
          "tokens/event_handles_validated", "tokens/client_handles_validated"]),
    Rule("5.kinds", "5", "the same holds for every handle kind (client, prepared model, event): one of another "
         "kind, released, never issued or another client's is INVALID_ARGUMENT", ALL_CALLS,
         "INVALID_ARGUMENT", "both", ["handle", "counts"],
         ["tokens/handle_kinds_do_not_mix", "tokens/client_handles_validated", "tokens/prepared_handles_validated",
          "tokens/event_handles_validated", "clients/prepared_and_event_bound_to_client"]),
    Rule("5.fresh_memory", "5", "device memory handed to a new buffer never shows bytes of an earlier one",
         ["allocate"], "NONE", "output", ["counts"], [],
         {"counts": "every v1 operation writes its whole output and a new buffer is uninitialized (copy_to: "
                    "GENERAL_FAILURE), so no trace can read a new buffer's untouched bytes"}),
    Rule("5.close_client", "5", "close_client releases all the client holds and reports what was still live in "
         "md_leak_report", ["close_client"], "NONE", "none", ["leaks", "counts"],
         ["clients/leak_report_counts", "clients/leak_report_bytes", "clients/clean_client_reports_nothing",
          "async/close_client_with_execution_in_flight"]),
    # ---- 6. Concurrency and lifetimes ----
    Rule("6.readers", "6", "concurrent reads of one buffer (execution inputs, copy_to) all succeed",
         ["execute", "copy_to"], "NONE", "input", [], ["concurrency/concurrent_readers_all_succeed"]),
    Rule("6.writers", "6", "concurrent writes or read+write of one buffer: each call NONE or an error, no crash, "
         "no other buffer corrupted", ["execute", "copy_from", "copy_to"], "any", "both", [],
         ["concurrency/racing_writers_keep_other_buffers_intact", "concurrency/racing_writers_reader_sees_whole_value",
          "concurrency/racing_writer_large_buffer_reader_sees_whole_value"]),
    Rule("6.in_use", "6", "free_buffer / release / close_client while in use: the handle dies at once for new "
         "calls, the memory goes when the last use ends", ["free_buffer", "release_prepared_model", "close_client"],
         "NONE", "none", ["handle"],
         ["concurrency/free_buffer_during_async_execution", "concurrency/close_client_during_calls",
          "async/release_prepared_while_running", "concurrency/copy_from_during_queued_async_read_keeps_snapshot"]),
    Rule("6.scopes", "6", "resource scopes and counted lifetimes (saturating reference counts)", [], "-", "none",
         [], [], {}, "not reachable through the driver ABI: runtime unit tests (runtime/tests)"),
    # ---- 7. Kernels ----
    Rule("7.binary", "7", "ADD/SUB/MUL: numpy-style broadcasting and the INT32 fused activation (0 none, 1 relu, "
         "2 relu1, 3 relu6)", ["execute"], "NONE", "none", ["numerics"],
         ["numerics/add_broadcast_trailing_axis", "numerics/add_broadcast_both_operands", "numerics/add_fused_relu",
          "numerics/add_fused_relu1", "numerics/add_fused_relu6", "numerics/sub_broadcast_relu6",
          "numerics/sub_rank_broadcast", "numerics/mul_broadcast_relu1", "numerics/mul_scalar_like_tensor"]),
    Rule("7.relu", "7", "RELU: max(x, 0)", ["execute"], "NONE", "none", ["numerics"],
         ["numerics/relu", "numerics/relu_nan_passes_through"]),
    Rule("7.fully_connected", "7", "FULLY_CONNECTED (input, weights [units, in], bias [units], activation)",
         ["execute"], "NONE", "none", ["numerics"],
         ["numerics/fully_connected_bias", "numerics/fully_connected_relu", "numerics/fully_connected_flattens_input"]),
    Rule("7.softmax", "7", "SOFTMAX (input, FLOAT32 beta, optional INT32 axis)", ["execute"], "NONE", "none",
         ["numerics"], ["numerics/softmax_default_axis", "numerics/softmax_beta_half", "numerics/softmax_axis0",
                        "numerics/softmax_negative_axis"]),
    Rule("7.reshape", "7", "RESHAPE (input, TENSOR_INT32 shape, one -1 allowed)", ["execute"], "NONE", "none",
         ["numerics"], ["numerics/reshape_minus_one", "numerics/reshape_explicit_rank3", "numerics/reshape_to_rank1"]),
    Rule("7.concatenation", "7", "CONCATENATION (n tensors + INT32 axis)", ["execute"], "NONE", "none",
         ["numerics"], ["numerics/concatenation_axis0", "numerics/concatenation_negative_axis",
                        "numerics/concatenation_three_inputs"]),
    Rule("7.types", "7", "TENSOR_FLOAT32 kernels are required; other types are validated and reported "
         "unsupported until kernels exist; (v1.2) operand validity follows the NN HAL: a TENSOR_INT32 operand may "
         "carry a scale (a quantized FULLY_CONNECTED's bias: input scale x weights scale, zero point 0), and a valid "
         "operation without a kernel is unsupported (get_supported_operations NONE with 0 for it), never "
         "INVALID_ARGUMENT", ["get_supported_operations", "prepare_model"], "GENERAL_FAILURE", "none", [],
         ["models/supported_operations_float_vs_quant8", "models/invalid_outranks_unsupported",
          "models/quant8_fully_connected_int32_bias_scale_is_valid_unsupported"]),
    Rule("7.registry", "7", "one kernel registry keyed by (name, platform); a duplicate registration fails", [],
         "-", "none", [], [], {}, "not reachable through the driver ABI: kernel registry unit tests"),
    # ---- 8. Settled points ----
    Rule("8.1", "8.1", "an output shorter than its dims' byte size is OUTPUT_INSUFFICIENT_SIZE with a shape for "
         "every output; a longer output length, and any input length that differs, are INVALID_ARGUMENT; bytes of "
         "a pool beyond an output's length are never written; (v1.2) a length of 0 on a normal pool output means "
         "no bytes: it is short for any output that produces bytes", ["execute", "wait_event"],
         "OUTPUT_INSUFFICIENT_SIZE", "both", ["side", "entry", "shared_pool"],
         ["shapes/both_outputs_short", "shapes/first_output_short", "shapes/second_output_short",
          "shapes/short_output_known_dims", "shapes/zero_length_output_is_short"]),
    Rule("8.2", "8.2", "a pool descriptor breaking SPEC 2's validation is INVALID_ARGUMENT at every entry point "
         "that takes one (prepare, execute, execute_async, copy_from, copy_to)",
         ["prepare_model", "execute", "execute_async", "copy_from", "copy_to"], "INVALID_ARGUMENT", "both",
         ["entry", "geometry"], ["pools/hardware_buffer_rejected_in_copies_and_model"]),
    Rule("8.3", "8.3", "an allocation larger than the whole limit is RESOURCE_EXHAUSTED_PERSISTENT; one that fits "
         "the limit but not what is free is RESOURCE_EXHAUSTED_TRANSIENT", ["allocate"],
         "RESOURCE_EXHAUSTED_*", "none", ["counts"],
         ["faults/mem_limit_persistent_vs_transient", "allocate/unservable_allocation_fails_cleanly"]),
    Rule("8.4", "8.4", "a driver may refuse to allocate a non-float32 buffer (GENERAL_FAILURE); a trace then checks "
         "nothing more about it", ["allocate"], "NONE|GENERAL_FAILURE", "none", ["side"],
         ["allocate/role_operands_agree"]),
    Rule("8.5", "8.5", "every INVALID_ARGUMENT rule of SPEC 2 and 4, over all arguments, is checked before any "
         "initialization check", ["execute", "execute_async"], "INVALID_ARGUMENT", "both", ["side", "entry"],
         ["execute/role_before_initialization", "deinit/uninitialized_input_uninitializes_output"]),
    Rule("8.6", "8.6", "an input's dims combine with the buffer's current dims, an output's with its initial dims",
         ["execute", "execute_async"], "INVALID_ARGUMENT", "both", ["side", "after_failure"],
         ["execute/token_arg_dims_combine", "dynamic/output_read_back_as_input",
          "dynamic/successive_executions_resize"]),
    Rule("8.7", "8.7", "a token in a request's pools that no argument uses is validated as a handle only",
         ["execute", "execute_async"], "INVALID_ARGUMENT", "none", ["handle", "entry"],
         ["pools/unused_invalid_pools_rejected"]),
    Rule("8.8", "8.8", "every failure that uninitializes a buffer (copy_from, an execution, a device loss) keeps its "
         "current dims", ["copy_from", "execute", "wait_event"], "-", "output", ["after_failure", "entry"],
         ["copy/copy_from_failure_keeps_current_dims"]),
    Rule("8.9", "8.9", "execute_async returns what request validation finds; what needs the kernels comes from "
         "wait_event; a failed execution's event is consumed by its first wait and counted by close_client only "
         "while not waited for; (v1.2) a device lost during the execution (a sim device_lost@N drawn at it "
         "included) is its wait_event's DEVICE_UNAVAILABLE, and only a device lost before the call makes "
         "execute_async return DEVICE_UNAVAILABLE at once", ["execute_async", "wait_event", "close_client"], "-",
         "none", ["after_failure", "leaks"],
         ["async/validation_failure_makes_no_event", "deinit/async_failure_uninitializes_output",
          "faults/kernel_fail_async", "faults/device_lost_async_surfaces_at_wait"]),
    Rule("8.10", "8.10", "leak report bytes: each live buffer at its current size (resized: the new size; never "
         "written with unknown dims: 0)", ["close_client"], "NONE", "none", ["leaks"],
         ["clients/leak_report_bytes", "clients/leak_report_bytes_after_shrink"]),
    Rule("8.11", "8.11", "a status is the contract, a message is advice: no verdict on a message's wording",
         ALL_CALLS, "-", "none", [], [], {}, "the replayer's rule: message expectations are advisory unless "
         "--strict-messages (the corpus's own run of the reference driver)"),
    Rule("8.12", "8.12", "handles carry unpredictable bits: among 1,000 handles of one kind issued to one client, "
         "no two differ only in their low 32 bits", ["open_client", "prepare_model", "allocate", "execute_async"],
         "-", "none", ["predictability"], ["basic/client_handles_not_neighbours"]),
    # ---- 8. Settled points, v1.2 ----
    Rule("8.13", "8.13", "hardware buffer geometry: a BLOB has format 0x21, height = layers = 1, width > 0, size = "
         "width, offset 0; a non-BLOB hardware buffer has offset = size = 0, width, height, layers > 0, a known "
         "format (at least RGBA_8888, RGB_888, R_8) and width x height x layers x bytes-per-pixel inside its file, "
         "and request arguments on it have offset = length = 0 (the whole buffer); breaking one is INVALID_ARGUMENT "
         "at every entry point that takes the descriptor",
         ["prepare_model", "execute", "execute_async", "copy_from", "copy_to"], "INVALID_ARGUMENT", "both",
         ["entry", "side", "geometry"],
         ["pools/blob_request_and_copies", "pools/hardware_buffer_execution_io",
          "pools/hardware_buffer_rejected_in_copies_and_model"]),
    Rule("8.14", "8.14", "access rights: a pool read (copy_from, an execution input, a model's constants) needs "
         "PROT_READ, one written (copy_to, an execution output) PROT_WRITE; lacking it is INVALID_ARGUMENT at "
         "validation, before mapping, and the pool is never written; a registered pool's registered prot decides",
         ["prepare_model", "execute", "execute_async", "copy_from", "copy_to"], "INVALID_ARGUMENT", "both",
         ["entry", "side", "geometry"],
         ["copy/pool_access_rights", "registered/registered_prot_decides_access"]),
    Rule("8.15", "8.15", "models are validated whole: prepare_model and get_supported_operations refuse an invalid "
         "model (an operand index out of range, an operand read before it is written, an operation kind that does "
         "not exist, a parameter outside the NN HAL's range) with INVALID_ARGUMENT, even when it also holds "
         "unsupported operations (invalid outranks unsupported)", ["get_supported_operations", "prepare_model"],
         "INVALID_ARGUMENT", "none", ["entry", "numerics"],
         ["models/graph_validation", "models/invalid_outranks_unsupported", "models/operation_parameters_validated",
          "models/quant8_fully_connected_int32_bias_scale_is_valid_unsupported"]),
    Rule("8.16", "8.16", "every failure uninitializes device outputs: OUTPUT_INSUFFICIENT_SIZE too leaves the "
         "request's token outputs uninitialized (dims kept, 8.8), and nothing is copied into any pool output",
         ["execute", "wait_event"], "-", "output", ["entry", "shared_pool"],
         ["shapes/insufficient_size_uninitializes_device_output"]),
    Rule("8.17", "8.17", "sizes never wrap: dims whose byte size does not fit 64 bits have no size, and an "
         "offset + length or offset + size past 2^64 is no range: an argument or descriptor naming them is "
         "INVALID_ARGUMENT, never a wrapped size that happens to match",
         ["prepare_model", "execute", "execute_async", "copy_from", "copy_to", "allocate"], "INVALID_ARGUMENT", "both",
         ["entry", "side", "geometry"],
         ["execute/output_dims_byte_size_wraps_to_its_length", "pools/offset_overflow_rejected",
          "allocate/dims_byte_size_does_not_fit_is_invalid"],
         partial={"geometry": "a descriptor's offset + size can wrap only on a pipe, which fails the range check "
                              "with or without the wrap (trace memories are real files of at most 1 GiB)"}),
    Rule("8.18", "8.18", "a NULL device given to an entry point that takes one is INVALID_ARGUMENT, never a crash",
         ["get_capabilities", "get_supported_operations", "open_client"]
         + ALL_CALLS + ["register_memory", "unregister_memory"], "INVALID_ARGUMENT", "none", ["entry"],
         ["basic/null_device_rejected"],
         note="each generated trace also checks that nothing the refused call named was touched; close_device(NULL) "
              "returns nothing (the reference ignores it) and a trace cannot call it (the replayer refuses a NULL "
              "device for close_device)"),
]

RULES = {r.id: r for r in _rows}
RULE_ORDER = [r.id for r in _rows]
assert len(RULES) == len(_rows), "duplicate rule id"
