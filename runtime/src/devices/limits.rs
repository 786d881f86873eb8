//! What a device can do, in the terms of CUDA's device properties: read from the driver for
//! a GPU, nominal for the host's cores, and combined over a run's devices into the one
//! device a CUDA program sees (the sum of memory and multiprocessors, the least of every
//! per-block limit and of the compute capability, so that whatever the program sizes by
//! them fits every real device).

/// The properties of one device, or of the combined device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    pub name: String,
    pub total_memory: u64,
    pub multiprocessors: u32,
    /// Compute capability (major, minor).
    pub capability: (u32, u32),
    pub shared_per_block: u64,
    pub shared_per_block_optin: u64,
    pub shared_per_multiprocessor: u64,
    pub constant_memory: u64,
    pub registers_per_block: u32,
    pub registers_per_multiprocessor: u32,
    pub warp_size: u32,
    pub max_threads_per_block: u32,
    pub max_threads_per_multiprocessor: u32,
    pub max_block: [u32; 3],
    pub max_grid: [u32; 3],
    pub clock_khz: u32,
    pub memory_clock_khz: u32,
    pub memory_bus_bits: u32,
    pub l2_bytes: u32,
}

impl DeviceLimits {
    /// The host's cores as a nominal GPU (`HPVM_MGPU_DEVICES=cpu...`): the limits of the GPU
    /// architecture `hpvm-mgpu build` targets by default (sm_80), the host's memory, one
    /// multiprocessor per worker thread.
    pub fn host(threads: usize) -> DeviceLimits {
        // SAFETY: sysconf has no preconditions.
        let (pages, page) = unsafe { (libc_sysconf(SC_PHYS_PAGES), libc_sysconf(SC_PAGESIZE)) };
        DeviceLimits {
            name: "hpvm-mgpu CPU".into(),
            total_memory: (pages.max(0) as u64).saturating_mul(page.max(0) as u64),
            multiprocessors: threads.max(1) as u32,
            capability: (8, 0),
            shared_per_block: 48 << 10,
            shared_per_block_optin: 163 << 10,
            shared_per_multiprocessor: 164 << 10,
            constant_memory: 64 << 10,
            registers_per_block: 65536,
            registers_per_multiprocessor: 65536,
            warp_size: 32,
            max_threads_per_block: 1024,
            max_threads_per_multiprocessor: 2048,
            max_block: [1024, 1024, 64],
            max_grid: [i32::MAX as u32, 65535, 65535],
            clock_khz: 0,
            memory_clock_khz: 0,
            memory_bus_bits: 0,
            l2_bytes: 0,
        }
    }

    /// The one device a program sees over `devices` (at least one).
    pub fn combine(devices: &[DeviceLimits]) -> DeviceLimits {
        let first = &devices[0];
        let min = |f: fn(&DeviceLimits) -> u64| devices.iter().map(f).min().unwrap_or(0);
        let min32 = |f: fn(&DeviceLimits) -> u32| devices.iter().map(f).min().unwrap_or(0);
        let same_name = devices.iter().all(|d| d.name == first.name);
        DeviceLimits {
            name: match (devices.len(), same_name) {
                (1, _) => first.name.clone(),
                (n, true) => format!("{n} x {}", first.name),
                (n, false) => {
                    format!("{n} devices ({})", devices.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", "))
                }
            },
            total_memory: devices.iter().map(|d| d.total_memory).sum(),
            multiprocessors: devices.iter().map(|d| d.multiprocessors).sum(),
            capability: devices.iter().map(|d| d.capability).min().unwrap_or((0, 0)),
            shared_per_block: min(|d| d.shared_per_block),
            shared_per_block_optin: min(|d| d.shared_per_block_optin),
            shared_per_multiprocessor: min(|d| d.shared_per_multiprocessor),
            constant_memory: min(|d| d.constant_memory),
            registers_per_block: min32(|d| d.registers_per_block),
            registers_per_multiprocessor: min32(|d| d.registers_per_multiprocessor),
            warp_size: first.warp_size,
            max_threads_per_block: min32(|d| d.max_threads_per_block),
            max_threads_per_multiprocessor: min32(|d| d.max_threads_per_multiprocessor),
            max_block: std::array::from_fn(|i| devices.iter().map(|d| d.max_block[i]).min().unwrap_or(0)),
            max_grid: std::array::from_fn(|i| devices.iter().map(|d| d.max_grid[i]).min().unwrap_or(0)),
            clock_khz: min32(|d| d.clock_khz),
            memory_clock_khz: min32(|d| d.memory_clock_khz),
            memory_bus_bits: min32(|d| d.memory_bus_bits),
            l2_bytes: min32(|d| d.l2_bytes),
        }
    }
}

const SC_PAGESIZE: i32 = 30;
const SC_PHYS_PAGES: i32 = 85;

extern "C" {
    #[link_name = "sysconf"]
    fn libc_sysconf(name: i32) -> i64;
}

#[cfg(test)]
mod tests {
    use super::DeviceLimits;

    #[test]
    fn devices_combine_into_one() {
        let gpu = |name: &str, mem: u64, sms: u32, cc: (u32, u32), shared: u64| DeviceLimits {
            name: name.into(),
            total_memory: mem,
            multiprocessors: sms,
            capability: cc,
            shared_per_block: shared,
            ..DeviceLimits::host(4)
        };
        let one = gpu("H200", 140, 132, (9, 0), 48);
        assert_eq!(DeviceLimits::combine(std::slice::from_ref(&one)), one);
        let two = DeviceLimits::combine(&[one.clone(), one.clone()]);
        assert_eq!((two.name.as_str(), two.total_memory, two.multiprocessors), ("2 x H200", 280, 264));
        let mixed = DeviceLimits::combine(&[one, gpu("A100", 80, 108, (8, 0), 40)]);
        assert_eq!((mixed.capability, mixed.shared_per_block, mixed.multiprocessors), ((8, 0), 40, 240));
        assert_eq!(mixed.name, "2 devices (H200, A100)");
        assert!(DeviceLimits::host(2).total_memory > 0);
    }
}
