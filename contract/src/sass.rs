//! The GPUs' machine code an executable carries beside its PTX: one cubin per architecture,
//! assembled at build time by `ptxas` (as nvcc embeds SASS), so that a GPU of one of those
//! architectures loads its kernels without the driver's JIT. Any other GPU compiles the PTX.
//!
//! The build writes the images with [`pack`] into one constant of the executable; the runtime
//! reads them back with [`Images::read`] and picks one per GPU with [`Images::pick`].
//!
//! Layout (little-endian): the magic `HPVMSASS`, a `u32` count, then per image a `u32` major,
//! `u32` minor, `u32` flags (bit 0: an architecture-specific target such as `sm_90a`), `u32`
//! padding, a `u64` length and the cubin's bytes, padded to a multiple of 8.

const MAGIC: &[u8; 8] = b"HPVMSASS";
const ARCH_SPECIFIC: u32 = 1;

/// A GPU architecture as ptxas names it: `sm_90` is (9, 0, false), `sm_90a` (9, 0, true).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arch {
    pub major: u32,
    pub minor: u32,
    /// Code for exactly this architecture (`a` suffix), which no other runs.
    pub specific: bool,
}

impl Arch {
    /// Parses `sm_80`, `sm_90a`, `compute_75`...; `None` for anything else.
    pub fn parse(name: &str) -> Option<Arch> {
        let digits = name.strip_prefix("sm_").or_else(|| name.strip_prefix("compute_"))?;
        let (digits, specific) = match digits.strip_suffix('a') {
            Some(d) => (d, true),
            None => (digits, false),
        };
        if digits.len() < 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n: u32 = digits.parse().ok()?;
        Some(Arch { major: n / 10, minor: n % 10, specific })
    }

    /// Whether a GPU of compute capability `cc` runs this architecture's machine code: the
    /// same major version, a minor at least this one (the exact one for specific code).
    pub fn runs_on(&self, cc: (u32, u32)) -> bool {
        cc.0 == self.major && if self.specific { cc.1 == self.minor } else { cc.1 >= self.minor }
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sm_{}{}{}", self.major, self.minor, if self.specific { "a" } else { "" })
    }
}

/// The images as one blob.
pub fn pack(images: &[(Arch, Vec<u8>)]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend((images.len() as u32).to_le_bytes());
    for (arch, code) in images {
        let flags = if arch.specific { ARCH_SPECIFIC } else { 0 };
        for v in [arch.major, arch.minor, flags, 0] {
            out.extend(v.to_le_bytes());
        }
        out.extend((code.len() as u64).to_le_bytes());
        out.extend(code);
        out.resize(out.len().next_multiple_of(8), 0);
    }
    out
}

/// The images of an executable.
#[derive(Clone, Debug, Default)]
pub struct Images(Vec<(Arch, &'static [u8])>);

impl Images {
    /// The images of a blob [`pack`] wrote; none where `blob` is null or not such a blob.
    ///
    /// # Safety
    /// `blob` is null or points to a constant of the executable that [`pack`] wrote.
    pub unsafe fn read(blob: *const u8) -> Images {
        if blob.is_null() {
            return Images::default();
        }
        // SAFETY: the header is there by the caller's promise.
        let header = unsafe { std::slice::from_raw_parts(blob, 12) };
        if &header[..8] != MAGIC {
            return Images::default();
        }
        let count = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
        let mut at = 12usize;
        let mut images = Vec::new();
        for _ in 0..count {
            // SAFETY: each image's header and bytes follow, as `pack` wrote them.
            let h = unsafe { std::slice::from_raw_parts(blob.add(at), 24) };
            let word = |i: usize| u32::from_le_bytes(h[i * 4..i * 4 + 4].try_into().expect("4 bytes"));
            let len = u64::from_le_bytes(h[16..24].try_into().expect("8 bytes")) as usize;
            let arch = Arch { major: word(0), minor: word(1), specific: word(2) & ARCH_SPECIFIC != 0 };
            // SAFETY: as above; the executable's constants live as long as the program.
            let code = unsafe { std::slice::from_raw_parts(blob.add(at + 24), len) };
            images.push((arch, code));
            at = (at + 24 + len).next_multiple_of(8);
        }
        Images(images)
    }

    /// The machine code a GPU of compute capability `cc` runs best: the image of its exact
    /// architecture, else the newest one of its major version it can run.
    pub fn pick(&self, cc: (u32, u32)) -> Option<(Arch, &'static [u8])> {
        let runs = self.0.iter().filter(|(a, _)| a.runs_on(cc));
        runs.max_by_key(|(a, _)| (a.minor, a.specific)).copied()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The architectures held, for messages.
    pub fn archs(&self) -> Vec<Arch> {
        self.0.iter().map(|(a, _)| *a).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architectures_parse_and_say_which_gpus_run_them() {
        let a = |s| Arch::parse(s).unwrap();
        assert_eq!(a("sm_80"), Arch { major: 8, minor: 0, specific: false });
        assert_eq!(a("sm_90a"), Arch { major: 9, minor: 0, specific: true });
        assert_eq!(a("compute_75").to_string(), "sm_75");
        assert_eq!(a("sm_100").major, 10);
        for bad in ["sm_", "sm_8", "gfx90a", "sm_8x", "sm_90b"] {
            assert_eq!(Arch::parse(bad), None, "{bad}");
        }
        assert!(a("sm_80").runs_on((8, 6)) && !a("sm_86").runs_on((8, 0)) && !a("sm_80").runs_on((9, 0)));
        assert!(a("sm_90a").runs_on((9, 0)) && !a("sm_90a").runs_on((9, 1)));
    }

    #[test]
    fn packed_images_read_back_and_each_gpu_gets_its_own() {
        let images = vec![
            (Arch::parse("sm_80").unwrap(), vec![1u8, 2, 3]),
            (Arch::parse("sm_86").unwrap(), vec![4u8; 9]),
            (Arch::parse("sm_90").unwrap(), vec![]),
        ];
        let blob: &'static [u8] = Vec::leak(pack(&images));
        let read = unsafe { Images::read(blob.as_ptr()) };
        assert_eq!(read.archs(), images.iter().map(|(a, _)| *a).collect::<Vec<_>>());
        assert_eq!(read.pick((8, 0)).unwrap().1, &[1, 2, 3]);
        assert_eq!(read.pick((8, 9)).unwrap().1, &[4u8; 9]);
        assert_eq!(read.pick((9, 0)).unwrap().1, &[] as &[u8]);
        assert!(read.pick((7, 5)).is_none() && read.pick((10, 0)).is_none());
        assert!(unsafe { Images::read(std::ptr::null()) }.is_empty());
        assert!(unsafe { Images::read([b'N'; 16].as_ptr()) }.is_empty());
    }
}
