//! The declaration data the [`handler`](crate::handler) macro emits: [`Declaration`]
//! (every parameter's name and kind, and the optional rules) and [`ParamDecl`].

use crate::attr::{EnumValues, FieldDecl};
use crate::dtype::{str_eq, DataType};

/// What one handler parameter is, for the declaration: an operand, a result or an
/// attribute (with what it accepts), or something else (context, state).
///
/// Each [`Decode`](crate::Decode) type says it with [`Decode::DECL`](crate::Decode::DECL).
/// Non-exhaustive: a kind of parameter added later is not a breaking change, so a
/// `match` outside this crate needs a `_` arm.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum ParamDecl {
    /// Not part of the declaration: [`Context`](crate::Context), [`State`](crate::State),
    /// remaining operands, custom decoders.
    Other,
    /// One operand buffer, accepting the dtypes for which the function is true.
    Operand(fn(DataType) -> bool),
    /// One result buffer, accepting the dtypes for which the function is true.
    Result(fn(DataType) -> bool),
    /// An optional operand (`Option<Buffer<..>>`): a trailing operand the call may
    /// leave out.
    OptionalOperand(fn(DataType) -> bool),
    /// An optional result (`Option<ResultBuffer<..>>`).
    OptionalResult(fn(DataType) -> bool),
    /// One attribute: its type's name (`f64`, `str`, `array<i64>`) and whether it
    /// may be absent.
    Attribute {
        /// The type's name, as in [`FromAttr::type_name`](crate::FromAttr::type_name).
        type_name: fn() -> String,
        /// Whether the attribute may be absent (`Attr<Option<T>>`).
        optional: fn() -> bool,
        /// An enum attribute's valid values, as in
        /// [`FromAttr::enum_values`](crate::FromAttr::enum_values).
        enum_values: fn() -> Option<EnumValues>,
    },
    /// Attributes named by fields ([`Attrs`](crate::Attrs) of an
    /// [`attributes!`](crate::attributes) struct): each field is an attribute of the
    /// declaration, as [`FromAttrs::field_decls`](crate::FromAttrs::field_decls) lists them.
    Attributes(fn() -> Vec<FieldDecl>),
}

/// What the [`handler`](crate::handler) macro's compile-time check of the declared
/// rules knows of one buffer parameter: the dtypes it accepts
/// ([`ElementSpec::DTYPES`](crate::ElementSpec::DTYPES)) and its rank parameter.
/// [`Decode::BUFFER`](crate::Decode) gives it; a rule that no call could satisfy with
/// these parameter types (`float32` on a `Buffer<f64>`, a spec of two axes on a
/// `Buffer<f32, 1>`) is a compile error.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct BufferBounds {
    /// The accepted dtypes, or `None` for any (or unknown).
    pub dtypes: Option<&'static [DataType]>,
    /// The rank, or [`ANY_RANK`](crate::ANY_RANK).
    pub rank: usize,
}

impl BufferBounds {
    /// Nothing known: any dtype, any rank.
    pub const UNKNOWN: BufferBounds = BufferBounds { dtypes: None, rank: ANY_RANK };

    /// The accepted dtypes as a bit set over dtype codes (bit `c` for `DataType(c)`);
    /// every bit for `None` or a list with a code past 63.
    pub const fn dtype_mask(&self) -> u64 {
        let Some(list) = self.dtypes else {
            return !0;
        };
        let mut mask = 0u64;
        let mut i = 0;
        while i < list.len() {
            if list[i].0 >= 64 {
                return !0;
            }
            mask |= 1 << list[i].0;
            i += 1;
        }
        mask
    }

    /// Whether a buffer of `axes` axes (at least `axes` with `ellipsis`) can have this
    /// rank.
    pub const fn rank_fits(&self, axes: usize, ellipsis: bool) -> bool {
        self.rank == ANY_RANK || self.rank == axes || (ellipsis && self.rank > axes)
    }
}

/// `buffer::ANY_RANK`, written here so that `decl` does not import `buffer` (which
/// imports `decl`); the test `declaration` checks that they are one value.
const ANY_RANK: usize = usize::MAX;

/// An op's declaration: its parameters in order, and the rules given in
/// `#[handler(shapes = ..., dtypes = ..., linear = ..., transpose = ...)]`.
///
/// The [`handler`](crate::handler) macro emits one for each handler, in its
/// [`HandlerDescriptor`](crate::HandlerDescriptor). It is plain data: the shim checks
/// calls against the rules it parsed at compile time, and `python::declarations`
/// hands it to Python.
///
/// ```
/// use xla_ffi::{handler, AnyFloat, Attr, Buffer, Result, ResultBuffer};
///
/// #[handler(target = "demo.scale", shapes = "...b -> ...b", dtypes = "T -> T", linear = "x",
///           transpose = "demo.scale")]
/// fn demo_scale(x: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>, k: Attr<f64>) -> Result<()> {
///     let _ = (x, y, k);
///     Ok(())
/// }
///
/// let d = DEMO_SCALE.declaration;
/// assert_eq!(d.operands().map(|(n, _)| n).collect::<Vec<_>>(), ["x"]);
/// assert_eq!(d.results().map(|(n, _)| n).collect::<Vec<_>>(), ["y"]);
/// assert_eq!(d.attributes().map(|(n, ty, _)| (n, ty)).collect::<Vec<_>>(), [("k", "f64".to_string())]);
/// assert_eq!(d.shapes, Some("...b -> ...b"));
/// assert_eq!(d.linear, ["x"]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Declaration {
    /// The FFI target name.
    pub target: &'static str,
    /// Every parameter of the handler, in order, with its name.
    pub params: &'static [(&'static str, ParamDecl)],
    /// The shape rule, if declared.
    pub shapes: Option<&'static str>,
    /// The dtype rule, if declared.
    pub dtypes: Option<&'static str>,
    /// The operands the op is linear in.
    pub linear: &'static [&'static str],
    /// The target that computes the transpose of the linear operands.
    pub transpose: Option<&'static str>,
}

impl Declaration {
    /// A declaration without rules (for hand-built descriptors).
    pub const fn new(target: &'static str, params: &'static [(&'static str, ParamDecl)]) -> Self {
        Declaration { target, params, shapes: None, dtypes: None, linear: &[], transpose: None }
    }

    /// The operands (optional ones included): name and accepted dtypes.
    pub fn operands(&self) -> impl Iterator<Item = (&'static str, fn(DataType) -> bool)> {
        self.params.iter().filter_map(|(n, p)| match p {
            ParamDecl::Operand(a) | ParamDecl::OptionalOperand(a) => Some((*n, *a)),
            _ => None,
        })
    }

    /// The results (optional ones included): name and accepted dtypes.
    pub fn results(&self) -> impl Iterator<Item = (&'static str, fn(DataType) -> bool)> {
        self.params.iter().filter_map(|(n, p)| match p {
            ParamDecl::Result(a) | ParamDecl::OptionalResult(a) => Some((*n, *a)),
            _ => None,
        })
    }

    /// Whether the operand (or result, with `result`) called `name` is optional
    /// (`Option<Buffer<..>>`, `Option<ResultBuffer<..>>`).
    pub fn is_optional(&self, result: bool, name: &str) -> bool {
        self.params.iter().any(|(n, p)| {
            *n == name
                && if result {
                    matches!(p, ParamDecl::OptionalResult(_))
                } else {
                    matches!(p, ParamDecl::OptionalOperand(_))
                }
        })
    }

    /// The attributes: name, type name and whether it is optional (an
    /// [`Attrs`](crate::Attrs) parameter's fields each count as one).
    pub fn attributes(&self) -> impl Iterator<Item = (&'static str, String, bool)> {
        self.params.iter().flat_map(|(n, p)| match p {
            ParamDecl::Attribute { type_name, optional, .. } => vec![(*n, type_name(), optional())],
            ParamDecl::Attributes(fields) => fields().into_iter().map(|f| (f.name, f.type_name, f.optional)).collect(),
            _ => Vec::new(),
        })
    }

    /// The valid values of attribute `name` if it is an enum (`#[derive(AttrEnum)]`),
    /// else `None`.
    ///
    /// ```
    /// use xla_ffi::{handler, Attr, AttrEnum, Buffer, Result, ResultBuffer};
    ///
    /// #[derive(AttrEnum, Clone, Copy)]
    /// enum Mode {
    ///     Sum = 0,
    ///     Max = 1,
    /// }
    ///
    /// #[handler(target = "demo.reduce_by", shapes = "n -> ()")]
    /// fn demo_reduce_by(x: Buffer<f32>, y: ResultBuffer<f32>, mode: Attr<Mode>, k: Attr<f64>) -> Result<()> {
    ///     let _ = (x, y, mode, k);
    ///     Ok(())
    /// }
    ///
    /// let e = DEMO_REDUCE_BY.declaration.attribute_enum("mode").unwrap();
    /// assert_eq!((e.name, e.variants), ("Mode", &[("Sum", 0), ("Max", 1)][..]));
    /// assert!(DEMO_REDUCE_BY.declaration.attribute_enum("k").is_none());
    /// ```
    pub fn attribute_enum(&self, name: &str) -> Option<EnumValues> {
        self.params.iter().find_map(|(n, p)| match p {
            ParamDecl::Attribute { enum_values, .. } if *n == name => enum_values(),
            ParamDecl::Attributes(fields) => fields().into_iter().find(|f| f.name == name).and_then(|f| f.enum_values),
            _ => None,
        })
    }

    /// The name of operand `i` (or result `i`), `?` past the end.
    pub(crate) fn buffer_name(&self, result: bool, i: usize) -> &'static str {
        let mut it = self.params.iter().filter(|(_, p)| match kind(p) {
            0 => !result,
            1 => result,
            _ => false,
        });
        it.nth(i).map_or("?", |(n, _)| *n)
    }

    /// How many parameters are operands (`kind` 0), results (1) or attributes (2):
    /// for the macro's compile-time checks.
    #[doc(hidden)]
    pub const fn __count(params: &[(&str, ParamDecl)], kind: u8) -> usize {
        let mut i = 0;
        let mut n = 0;
        while i < params.len() {
            if self::kind(&params[i].1) == kind {
                n += 1;
            }
            i += 1;
        }
        n
    }

    /// How many parameters are optional operands (`kind` 0) or optional results (1):
    /// for the macro's check of the rules' `?` marks.
    #[doc(hidden)]
    pub const fn __count_optional(params: &[(&str, ParamDecl)], kind: u8) -> usize {
        let mut i = 0;
        let mut n = 0;
        while i < params.len() {
            match params[i].1 {
                ParamDecl::OptionalOperand(_) if kind == 0 => n += 1,
                ParamDecl::OptionalResult(_) if kind == 1 => n += 1,
                _ => {}
            }
            i += 1;
        }
        n
    }

    /// The kind of parameter `name` (0 operand, 1 result, 2 attribute, 3 other, 4 no
    /// such parameter): for the macro's check of `scratch`.
    #[doc(hidden)]
    pub const fn __kind_of(params: &[(&str, ParamDecl)], name: &str) -> u8 {
        let mut i = 0;
        while i < params.len() {
            if str_eq(params[i].0, name) {
                return kind(&params[i].1);
            }
            i += 1;
        }
        4
    }

    /// Whether parameter `i` of `own` has the name of the parameter at the same place
    /// in `reference`: the `j`-th operand (result, attribute) of `own` is named like
    /// the `j`-th operand (result, attribute) of `reference`. Other parameters
    /// (context, state) match anything. For the macro's check of `op = ...`.
    #[doc(hidden)]
    pub const fn __same_place(own: &[(&str, ParamDecl)], reference: &[(&str, ParamDecl)], i: usize) -> bool {
        let k = kind(&own[i].1);
        if k == 3 {
            return true;
        }
        // j: how many parameters of kind k come before parameter i.
        let mut j = 0;
        let mut p = 0;
        while p < i {
            if kind(&own[p].1) == k {
                j += 1;
            }
            p += 1;
        }
        let mut q = 0;
        while q < reference.len() {
            if kind(&reference[q].1) == k {
                if j == 0 {
                    return str_eq(reference[q].0, own[i].0);
                }
                j -= 1;
            }
            q += 1;
        }
        false
    }

    /// Whether parameter `k` is operand `j` (`kind` 0) or result `j` (`kind` 1),
    /// optional or not: for the macro's check of the rules against the parameter types.
    #[doc(hidden)]
    pub const fn __is_buffer_at(params: &[(&str, ParamDecl)], k: usize, kind: u8, j: usize) -> bool {
        if self::kind(&params[k].1) != kind {
            return false;
        }
        let mut n = 0;
        let mut p = 0;
        while p < k {
            if self::kind(&params[p].1) == kind {
                n += 1;
            }
            p += 1;
        }
        n == j
    }

    /// Whether parameter `name` is an operand: for the macro's check of `linear`.
    #[doc(hidden)]
    pub const fn __is_operand(params: &[(&str, ParamDecl)], name: &str) -> bool {
        let mut i = 0;
        while i < params.len() {
            if kind(&params[i].1) == 0 && str_eq(params[i].0, name) {
                return true;
            }
            i += 1;
        }
        false
    }
}

/// 0 operand (optional or not), 1 result, 2 attribute, 3 other.
const fn kind(p: &ParamDecl) -> u8 {
    match p {
        ParamDecl::Operand(_) | ParamDecl::OptionalOperand(_) => 0,
        ParamDecl::Result(_) | ParamDecl::OptionalResult(_) => 1,
        ParamDecl::Attribute { .. } => 2,
        ParamDecl::Other | ParamDecl::Attributes(_) => 3,
    }
}
