//! The field keys of struct.proto (field number << 3 | wire type), as the one byte each encodes to: what the
//! encoder writes and the decoder's fast paths look for.

pub const STRUCT_FIELDS: u8 = 0x0a; // Struct.fields = 1, length-delimited (one map entry)
pub const ENTRY_KEY: u8 = 0x0a; // map entry key = 1, length-delimited
pub const ENTRY_VALUE: u8 = 0x12; // map entry value = 2, length-delimited
pub const NULL_VALUE: u8 = 0x08; // Value.null_value = 1, varint
pub const NUMBER_VALUE: u8 = 0x11; // Value.number_value = 2, fixed64
pub const STRING_VALUE: u8 = 0x1a; // Value.string_value = 3, length-delimited
pub const BOOL_VALUE: u8 = 0x20; // Value.bool_value = 4, varint
pub const STRUCT_VALUE: u8 = 0x2a; // Value.struct_value = 5, length-delimited
pub const LIST_VALUE: u8 = 0x32; // Value.list_value = 6, length-delimited
pub const LIST_ITEM: u8 = 0x0a; // ListValue.values = 1, length-delimited
