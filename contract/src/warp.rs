//! Warp operations the compiler hands to the runtime by number.

/// `redux.sync`'s operations, as the compiler numbers them for simulated devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Redux {
    Add = 0,
    Min = 1,
    Max = 2,
    UMin = 3,
    UMax = 4,
    And = 5,
    Or = 6,
    Xor = 7,
}

impl Redux {
    /// PTX's names of the operations, by number.
    pub const NAMES: [&'static str; 8] = ["add", "min", "max", "umin", "umax", "and", "or", "xor"];

    pub fn from_code(code: i32) -> Option<Redux> {
        use Redux::*;
        [Add, Min, Max, UMin, UMax, And, Or, Xor].get(usize::try_from(code).ok()?).copied()
    }

    /// The number of PTX's operation `name` (`umax`...).
    pub fn code_of(name: &str) -> Option<i32> {
        Redux::NAMES.iter().position(|&n| n == name).map(|i| i as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes_agree() {
        for (i, name) in Redux::NAMES.iter().enumerate() {
            let code = Redux::code_of(name).unwrap();
            assert_eq!(code, i as i32);
            assert_eq!(Redux::from_code(code).unwrap() as i32, code);
        }
        assert_eq!(Redux::code_of("mul"), None);
        assert_eq!(Redux::from_code(8), None);
    }
}
