//! The CUDA device, through the driver API (`cudarc`, loaded at run time: an executable built
//! here starts on machines without CUDA and falls back to the CPU).
//!
//! Every driver call's error is checked; a failure ends the program with the node's name.

use cudarc::driver::{result, sys};
use std::collections::HashMap;
use std::ffi::{c_void, CStr, CString};
use std::sync::Mutex;

pub struct Cuda {
    ctx: sys::CUcontext,
    pub name: String,
    /// GPUs the driver sees (`CUDA_VISIBLE_DEVICES` applies).
    pub visible: usize,
    /// Loaded PTX modules by the address of their text, and their kernels by name.
    modules: Mutex<HashMap<usize, sys::CUmodule>>,
    functions: Mutex<HashMap<(usize, String), sys::CUfunction>>,
}

// SAFETY: CUDA contexts, modules and functions may be used from any thread once the context
// is made current there, which `bind` does before every use.
unsafe impl Send for Cuda {}
unsafe impl Sync for Cuda {}

fn check<T>(what: &str, r: Result<T, result::DriverError>) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}

impl Cuda {
    /// The first GPU, if the driver is installed and sees one. `Err` when a GPU is there but
    /// unusable.
    pub fn open() -> Result<Option<Cuda>, String> {
        // SAFETY: probing for the driver library has no precondition.
        if !unsafe { sys::is_culib_present() } {
            return Ok(None);
        }
        if result::init().is_err() {
            return Ok(None);
        }
        let count = check("cuDeviceGetCount", result::device::get_count())?;
        if count < 1 {
            return Ok(None);
        }
        let dev = check("cuDeviceGet", result::device::get(0))?;
        let name = check("cuDeviceGetName", result::device::get_name(dev))?;
        // SAFETY: `dev` comes from cuDeviceGet.
        let ctx = check("cuDevicePrimaryCtxRetain", unsafe { result::primary_ctx::retain(dev) })?;
        let cuda = Cuda { ctx, name, visible: count as usize, modules: Mutex::default(), functions: Mutex::default() };
        cuda.bind()?;
        Ok(Some(cuda))
    }

    /// Makes the context current on this thread.
    pub fn bind(&self) -> Result<(), String> {
        // SAFETY: the context lives as long as `self`.
        check("cuCtxSetCurrent", unsafe { result::ctx::set_current(self.ctx) })
    }

    pub fn alloc(&self, bytes: usize) -> Result<u64, String> {
        self.bind()?;
        // SAFETY: plain device allocation.
        check("cuMemAlloc", unsafe { result::malloc_sync(bytes.max(1)) })
    }

    pub fn free(&self, p: u64) -> Result<(), String> {
        self.bind()?;
        // SAFETY: `p` came from `alloc` and is freed once.
        check("cuMemFree", unsafe { result::free_sync(p) })
    }

    /// Page-locks host memory so copies from and to it run at full DMA speed (no staging
    /// through the driver's bounce buffers). False when the driver refuses (for instance a
    /// range sharing pages with one already locked): copies then still work, slower.
    pub fn pin(&self, host: *mut u8, bytes: usize) -> bool {
        if self.bind().is_err() {
            return false;
        }
        // SAFETY: the range is host memory the program keeps alive while tracked.
        unsafe { sys::cuMemHostRegister_v2(host as *mut c_void, bytes, 0) }.result().is_ok()
    }

    pub fn unpin(&self, host: *mut u8) {
        if self.bind().is_ok() {
            // SAFETY: `host` was pinned by `pin`.
            let _ = unsafe { sys::cuMemHostUnregister(host as *mut c_void) };
        }
    }

    pub fn to_device(&self, dst: u64, src: &[u8]) -> Result<(), String> {
        self.bind()?;
        // SAFETY: `dst` has at least `src.len()` bytes (the caller's buffer bookkeeping).
        check("cuMemcpyHtoD", unsafe { result::memcpy_htod_sync(dst, src) })
    }

    pub fn to_host(&self, dst: &mut [u8], src: u64) -> Result<(), String> {
        self.bind()?;
        // SAFETY: `src` has at least `dst.len()` bytes.
        check("cuMemcpyDtoH", unsafe { result::memcpy_dtoh_sync(dst, src) })
    }

    fn function(&self, ptx: &'static CStr, kernel: &str) -> Result<sys::CUfunction, String> {
        let key = (ptx.as_ptr() as usize, kernel.to_string());
        if let Some(&f) = self.functions.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(f);
        }
        let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        let module = match modules.get(&key.0) {
            Some(&m) => m,
            None => {
                // SAFETY: NUL-terminated PTX text; the driver compiles it for this GPU.
                let m = check("cuModuleLoadData (compiling the PTX)", unsafe {
                    result::module::load_data(ptx.as_ptr() as *const c_void)
                })?;
                modules.insert(key.0, m);
                m
            }
        };
        let name = CString::new(kernel).map_err(|e| e.to_string())?;
        // SAFETY: `module` is loaded and never unloaded.
        let f =
            check(&format!("cuModuleGetFunction({kernel})"), unsafe { result::module::get_function(module, name) })?;
        self.functions.lock().unwrap_or_else(|e| e.into_inner()).insert(key, f);
        Ok(f)
    }

    /// Launches `kernel` and waits for it; returns its time on the GPU in milliseconds
    /// (CUDA events around the launch). `params` holds each parameter's bytes.
    pub fn launch(
        &self,
        ptx: &'static CStr,
        kernel: &str,
        grid: [u32; 3],
        block: [u32; 3],
        shared: u32,
        params: &mut [Vec<u8>],
    ) -> Result<f32, String> {
        self.bind()?;
        let f = self.function(ptx, kernel)?;
        let flags = sys::CUevent_flags::CU_EVENT_DEFAULT;
        let (start, stop) = (
            check("cuEventCreate", result::event::create(flags))?,
            check("cuEventCreate", result::event::create(flags))?,
        );
        if shared > 48 * 1024 {
            // SAFETY: a valid function handle; the attribute only raises a limit.
            check("cuFuncSetAttribute", unsafe {
                result::function::set_function_attribute(
                    f,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    shared as i32,
                )
            })?;
        }
        let mut ptrs: Vec<*mut c_void> = params.iter_mut().map(|p| p.as_mut_ptr() as *mut c_void).collect();
        let stream = std::ptr::null_mut();
        // SAFETY: events of this context on the null stream; one pointer per kernel parameter,
        // each to bytes of the parameter's size.
        unsafe {
            check("cuEventRecord", result::event::record(start, stream))?;
            check(
                &format!("launching {kernel}"),
                result::launch_kernel(
                    f,
                    (grid[0], grid[1], grid[2]),
                    (block[0], block[1], block[2]),
                    shared,
                    stream,
                    &mut ptrs,
                ),
            )?;
            check("cuEventRecord", result::event::record(stop, stream))?;
        }
        check(&format!("running {kernel}"), result::ctx::synchronize())?;
        // SAFETY: both events recorded and completed; destroyed once.
        let ms = check("cuEventElapsedTime", unsafe { result::event::elapsed(start, stop) })?;
        unsafe {
            let _ = result::event::destroy(start);
            let _ = result::event::destroy(stop);
        }
        Ok(ms)
    }
}

impl super::Device for Cuda {
    fn name(&self) -> &str {
        &self.name
    }

    fn alloc(&self, bytes: usize) -> Result<u64, String> {
        Cuda::alloc(self, bytes)
    }

    fn free(&self, addr: u64) -> Result<(), String> {
        Cuda::free(self, addr)
    }

    fn pin_host(&self, host: *mut u8, bytes: usize) -> bool {
        self.pin(host, bytes)
    }

    fn unpin_host(&self, host: *mut u8) {
        self.unpin(host)
    }

    /// Host to device or device to host, row by row (a contiguous run is one row). Peer
    /// copies come with multi-GPU runs.
    fn copy(&self, c: &super::Copy) -> Result<(), String> {
        use super::Place;
        for r in 0..c.rows {
            let (src, dst) = (c.src_addr + r * c.pitch, c.dst_addr + r * c.pitch);
            let n = c.row_bytes as usize;
            match (c.src, c.dst) {
                (Place::Host, Place::Device(_)) => {
                    // SAFETY: the memory manager hands host ranges inside a tracked buffer.
                    self.to_device(dst, unsafe { std::slice::from_raw_parts(src as *const u8, n) })?
                }
                (Place::Device(_), Place::Host) => {
                    // SAFETY: as above.
                    self.to_host(unsafe { std::slice::from_raw_parts_mut(dst as *mut u8, n) }, src)?
                }
                _ => return Err(format!("unsupported copy on one GPU: {c:?}")),
            }
        }
        Ok(())
    }

    fn synchronize(&self) -> Result<(), String> {
        // Copies are synchronous for now.
        Ok(())
    }
}
