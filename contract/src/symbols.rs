//! Names the compiler gives functions and globals that the runtime defines, writes or looks
//! up, and the layouts of those globals.

/// The address translations a leaf that keeps pointers in memory calls (`u64 -> u64`): the
/// program's address to the running device's, and back (`hpvm_runtime`'s
/// `devices::addresses`). The compiler declares them; the runtime defines them for simulated
/// devices, the GPU module for GPUs.
pub const TO_DEVICE: &str = "hpvm_rt_to_device_address";
pub const TO_PROGRAM: &str = "hpvm_rt_to_program_address";

/// A GPU module's address table, an array of `u64` the runtime writes before it launches a
/// translated leaf: the count `n`, `n` entries `(program start, end, device start)` sorted
/// by start, then from word [`ADDRESS_TABLE_BACK`] on, `n` entries `(device start, end,
/// program start)`.
pub const ADDRESS_TABLE: &str = "__hpvm_mgpu_addresses";
/// Buffers a GPU module's table holds at most; a launch with more runs on the host's copies.
pub const ADDRESS_TABLE_CAPACITY: usize = 1024;
/// Where the entries back to the program's addresses begin, in words.
pub const ADDRESS_TABLE_BACK: usize = 1 + 3 * ADDRESS_TABLE_CAPACITY;
/// The table's size in words.
pub const ADDRESS_TABLE_WORDS: usize = ADDRESS_TABLE_BACK + 3 * ADDRESS_TABLE_CAPACITY;

/// A GPU module's table of the host's addresses of the device functions whose addresses the
/// program takes (`u64` each, in the build's order): a function pointer the program stored
/// holds the host's address of its function, and GPU code looks it up here to call that
/// function's GPU version. The runtime writes it when the module loads on a GPU.
pub const FUNCTION_TABLE: &str = "__hpvm_mgpu_functions_host";
