//! One declaration per setting: [`conf_slots!`] writes a configuration level's struct with each
//! setting's field (an `Option`, unset until a directive sets it), its default, the accessor
//! that applies the default, and the merge that fills an unset field from the parent level. A
//! default then lives in one place, and code reads a setting only through its accessor.

/// Declares a configuration struct: `name: Type = default,` lines are settings (`Type` is
/// `Copy`; the accessor `name()` returns it, the default when unset), and the optional
/// `others { ... }` lines are plain fields the struct's own code merges and reads.
/// `merge_slots` fills every unset setting from the parent.
macro_rules! conf_slots {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                $field:ident: $ty:ty = $default:expr,
            )*
        }
        $(
            others {
                $(
                    $(#[$ometa:meta])*
                    $ovis:vis $ofield:ident: $oty:ty,
                )*
            }
        )?
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $(
                $(#[$fmeta])*
                pub $field: Option<$ty>,
            )*
            $($(
                $(#[$ometa])*
                $ovis $ofield: $oty,
            )*)?
        }

        impl $name {
            $(
                $(#[$fmeta])*
                #[inline]
                pub fn $field(&self) -> $ty {
                    match self.$field {
                        Some(v) => v,
                        None => $default,
                    }
                }
            )*

            /// Fills every setting this level left unset from `parent`.
            fn merge_slots(&mut self, parent: &Self) {
                $( $crate::conf::merge(&mut self.$field, &parent.$field); )*
            }
        }
    };
}

pub(crate) use conf_slots;
