//! A minimal binding to libfabric 1.17 (`rdma/fabric.h` and friends), loaded with `dlopen`
//! at run time ([`Lib::load`]), so the MPI library neither links libfabric nor needs it
//! installed.
//!
//! libfabric exports only a few real functions (`fi_getinfo`, `fi_freeinfo`, `fi_dupinfo`,
//! `fi_fabric`, `fi_strerror`); everything else (`fi_domain`, `fi_endpoint`, `fi_tsend`,
//! `fi_cq_read`, `fi_close`, ...) is a `static inline` wrapper in the headers that calls
//! through the ops tables stored in each object. The `#[repr(C)]` structs below mirror
//! those objects and tables as far as this transport reaches into them (later fields of a
//! table are left out: we only ever hold pointers to tables the library owns); the layout
//! test compiles the installed headers and compares sizes and offsets.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void, CStr};

use crate::sys::DynLib;

/// `fi_addr_t`.
pub(crate) type FiAddr = u64;

/// `FI_VERSION(1, 17)`: the API version we request.
pub(crate) const API_VERSION: u32 = (1 << 16) | 17;

// Capabilities and flags (`fabric.h`).
/// `FI_TAGGED`.
pub(crate) const FI_TAGGED: u64 = 1 << 3;
/// `FI_RMA`.
pub(crate) const FI_RMA: u64 = 1 << 2;
/// `FI_MSG`.
pub(crate) const FI_MSG: u64 = 1 << 1;
/// `FI_ATOMIC`: atomic operations on other endpoints' registered memory.
pub(crate) const FI_ATOMIC: u64 = 1 << 4;
/// `FI_ORDER_ATOMIC_RAW`: an atomic that reads sees the atomics written before it.
pub(crate) const FI_ORDER_ATOMIC_RAW: u64 = 1 << 37;
/// `FI_ORDER_ATOMIC_WAW`: atomic writes to one target apply in the order issued.
pub(crate) const FI_ORDER_ATOMIC_WAW: u64 = 1 << 39;
/// `FI_DIRECTED_RECV`: a receive may name the only source it takes.
pub(crate) const FI_DIRECTED_RECV: u64 = 1 << 59;
/// `FI_ORDER_SAS`: messages of one sender match receives in the order sent.
pub(crate) const FI_ORDER_SAS: u64 = 1 << 8;
/// `FI_READ`: we read other endpoints' memory (and register local buffers for it).
pub(crate) const FI_READ: u64 = 1 << 8;
/// `FI_REMOTE_READ`: other endpoints read ours.
pub(crate) const FI_REMOTE_READ: u64 = 1 << 12;
/// `FI_WRITE`: we write other endpoints' memory (and register local sources for it).
pub(crate) const FI_WRITE: u64 = 1 << 9;
/// `FI_REMOTE_WRITE`: other endpoints write ours.
pub(crate) const FI_REMOTE_WRITE: u64 = 1 << 13;
/// `FI_COMPLETION`: the operation reports its completion.
pub(crate) const FI_COMPLETION: u64 = 1 << 24;
/// `FI_DELIVERY_COMPLETE`: the completion means the data is visible at the target.
pub(crate) const FI_DELIVERY_COMPLETE: u64 = 1 << 28;
/// `FI_RECV`.
pub(crate) const FI_RECV: u64 = 1 << 10;
/// `FI_SEND` (`FI_TRANSMIT`).
pub(crate) const FI_SEND: u64 = 1 << 11;
/// `FI_CONTEXT` mode: operation contexts must point to a `struct fi_context`.
pub(crate) const FI_CONTEXT: u64 = 1 << 59;
/// `FI_CONTEXT2` mode: operation contexts must point to a `struct fi_context2`.
pub(crate) const FI_CONTEXT2: u64 = 1 << 52;
/// `FI_MR_LOCAL`: local buffers must be registered (their descriptor passed).
pub(crate) const FI_MR_LOCAL: c_int = 1 << 2;
/// `FI_MR_VIRT_ADDR`.
pub(crate) const FI_MR_VIRT_ADDR: c_int = 1 << 4;
/// `FI_MR_ALLOCATED`.
pub(crate) const FI_MR_ALLOCATED: c_int = 1 << 5;
/// `FI_MR_PROV_KEY`.
pub(crate) const FI_MR_PROV_KEY: c_int = 1 << 6;
/// `FI_MR_ENDPOINT`: registrations belong to an endpoint (`fi_mr_bind`, `fi_mr_enable`;
/// HPE Slingshot's `cxi`).
pub(crate) const FI_MR_ENDPOINT: c_int = 1 << 9;
/// `FI_ADDR_UNSPEC`.
pub(crate) const FI_ADDR_UNSPEC: FiAddr = u64::MAX;
/// `FI_PEEK`: a receive that only looks for a matching message (a probe).
pub(crate) const FI_PEEK: u64 = 1 << 19;
/// `FI_CLAIM`: with [`FI_PEEK`], keeps the message found for a later receive with the same
/// context; alone, that receive.
pub(crate) const FI_CLAIM: u64 = 1 << 59;

// Enumerations.
/// `FI_EP_RDM` (`enum fi_ep_type`).
pub(crate) const FI_EP_RDM: c_int = 3;
/// `FI_AV_TABLE` (`enum fi_av_type`).
pub(crate) const FI_AV_TABLE: c_int = 2;
/// `FI_THREAD_DOMAIN` (`enum fi_threading`): we serialise every call on the domain.
pub(crate) const FI_THREAD_DOMAIN: c_int = 3;
/// `FI_PROGRESS_MANUAL` (`enum fi_progress`).
pub(crate) const FI_PROGRESS_MANUAL: c_int = 2;
/// `FI_CQ_FORMAT_TAGGED` (`enum fi_cq_format`).
pub(crate) const FI_CQ_FORMAT_TAGGED: c_int = 4;
/// `FI_WAIT_NONE` (`enum fi_wait_obj`).
pub(crate) const FI_WAIT_NONE: c_int = 0;
/// `FI_ENABLE` (control command).
pub(crate) const FI_ENABLE: c_int = 6;

// Error numbers (`fi_errno.h`; the `errno` ones are the Linux values).
/// `FI_EAGAIN`.
pub(crate) const FI_EAGAIN: isize = libc::EAGAIN as isize;
/// `FI_EAVAIL`: an error completion is waiting (`fi_cq_readerr`).
pub(crate) const FI_EAVAIL: isize = 259;
/// `FI_ENOMSG`: a peek found no matching message.
pub(crate) const FI_ENOMSG: i32 = libc::ENOMSG;

/// `struct fid`: the header of every libfabric object.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct fid {
    pub fclass: usize,
    pub context: *mut c_void,
    pub ops: *mut fi_ops,
}

/// `struct fi_ops`: the generic operations of every object.
#[repr(C)]
pub(crate) struct fi_ops {
    pub size: usize,
    pub close: unsafe extern "C" fn(*mut fid) -> c_int,
    pub bind: unsafe extern "C" fn(*mut fid, *mut fid, u64) -> c_int,
    pub control: unsafe extern "C" fn(*mut fid, c_int, *mut c_void) -> c_int,
}

/// `struct fi_tx_attr`.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct fi_tx_attr {
    pub caps: u64,
    pub mode: u64,
    pub op_flags: u64,
    pub msg_order: u64,
    pub comp_order: u64,
    pub inject_size: usize,
    pub size: usize,
    pub iov_limit: usize,
    pub rma_iov_limit: usize,
    pub tclass: u32,
}

/// `struct fi_ep_attr`.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct fi_ep_attr {
    pub type_: c_int,
    pub protocol: u32,
    pub protocol_version: u32,
    pub max_msg_size: usize,
    pub msg_prefix_size: usize,
    pub max_order_raw_size: usize,
    pub max_order_war_size: usize,
    pub max_order_waw_size: usize,
    pub mem_tag_format: u64,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
    pub auth_key_size: usize,
    pub auth_key: *mut u8,
}

/// `struct fi_domain_attr` (up to `mr_mode`, the last field we touch).
#[repr(C)]
#[derive(Debug)]
pub(crate) struct fi_domain_attr {
    pub domain: *mut c_void,
    pub name: *mut c_char,
    pub threading: c_int,
    pub control_progress: c_int,
    pub data_progress: c_int,
    pub resource_mgmt: c_int,
    pub av_type: c_int,
    pub mr_mode: c_int,
}

/// `struct fi_fabric_attr`.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct fi_fabric_attr {
    pub fabric: *mut c_void,
    pub name: *mut c_char,
    pub prov_name: *mut c_char,
    pub prov_version: u32,
    pub api_version: u32,
}

/// `struct fi_info`.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct fi_info {
    pub next: *mut fi_info,
    pub caps: u64,
    pub mode: u64,
    pub addr_format: u32,
    pub src_addrlen: usize,
    pub dest_addrlen: usize,
    pub src_addr: *mut c_void,
    pub dest_addr: *mut c_void,
    pub handle: *mut fid,
    pub tx_attr: *mut fi_tx_attr,
    pub rx_attr: *mut fi_rx_attr,
    pub ep_attr: *mut fi_ep_attr,
    pub domain_attr: *mut fi_domain_attr,
    pub fabric_attr: *mut fi_fabric_attr,
    pub nic: *mut c_void,
}

/// `struct fi_ops_fabric` (up to `domain`).
#[repr(C)]
pub(crate) struct fi_ops_fabric {
    pub size: usize,
    pub domain: unsafe extern "C" fn(
        *mut fid_fabric,
        *mut fi_info,
        *mut *mut fid_domain,
        *mut c_void,
    ) -> c_int,
}

/// `struct fid_fabric`.
#[repr(C)]
pub(crate) struct fid_fabric {
    pub fid: fid,
    pub ops: *mut fi_ops_fabric,
    pub api_version: u32,
}

/// `struct fi_av_attr`.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct fi_av_attr {
    pub type_: c_int,
    pub rx_ctx_bits: c_int,
    pub count: usize,
    pub ep_per_node: usize,
    pub name: *const c_char,
    pub map_addr: *mut c_void,
    pub flags: u64,
}

/// `struct fi_cq_attr`.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct fi_cq_attr {
    pub size: usize,
    pub flags: u64,
    pub format: c_int,
    pub wait_obj: c_int,
    pub signaling_vector: c_int,
    pub wait_cond: c_int,
    pub wait_set: *mut c_void,
}

/// `struct fi_ops_domain` (up to `endpoint`).
#[repr(C)]
pub(crate) struct fi_ops_domain {
    pub size: usize,
    pub av_open: unsafe extern "C" fn(
        *mut fid_domain,
        *mut fi_av_attr,
        *mut *mut fid_av,
        *mut c_void,
    ) -> c_int,
    pub cq_open: unsafe extern "C" fn(
        *mut fid_domain,
        *mut fi_cq_attr,
        *mut *mut fid_cq,
        *mut c_void,
    ) -> c_int,
    pub endpoint:
        unsafe extern "C" fn(*mut fid_domain, *mut fi_info, *mut *mut fid_ep, *mut c_void) -> c_int,
}

/// `struct fi_ops_mr` (up to `reg`).
#[repr(C)]
pub(crate) struct fi_ops_mr {
    pub size: usize,
    #[allow(clippy::type_complexity)]
    pub reg: unsafe extern "C" fn(
        *mut fid,
        *const c_void,
        usize,
        u64,
        u64,
        u64,
        u64,
        *mut *mut fid_mr,
        *mut c_void,
    ) -> c_int,
}

/// `struct fid_domain`.
#[repr(C)]
pub(crate) struct fid_domain {
    pub fid: fid,
    pub ops: *mut fi_ops_domain,
    pub mr: *mut fi_ops_mr,
}

/// `struct fid_mr`.
#[repr(C)]
pub(crate) struct fid_mr {
    pub fid: fid,
    pub mem_desc: *mut c_void,
    pub key: u64,
}

/// `struct fi_ops_av` (up to `insert`).
#[repr(C)]
pub(crate) struct fi_ops_av {
    pub size: usize,
    pub insert: unsafe extern "C" fn(
        *mut fid_av,
        *const c_void,
        usize,
        *mut FiAddr,
        u64,
        *mut c_void,
    ) -> c_int,
}

/// `struct fid_av`.
#[repr(C)]
pub(crate) struct fid_av {
    pub fid: fid,
    pub ops: *mut fi_ops_av,
}

/// `struct fi_cq_tagged_entry`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct fi_cq_tagged_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
    pub buf: *mut c_void,
    pub data: u64,
    pub tag: u64,
}

/// `struct fi_cq_err_entry`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct fi_cq_err_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
    pub buf: *mut c_void,
    pub data: u64,
    pub tag: u64,
    pub olen: usize,
    pub err: c_int,
    pub prov_errno: c_int,
    pub err_data: *mut c_void,
    pub err_data_size: usize,
}

/// `struct fi_ops_cq` (up to `strerror`).
#[repr(C)]
pub(crate) struct fi_ops_cq {
    pub size: usize,
    pub read: unsafe extern "C" fn(*mut fid_cq, *mut c_void, usize) -> isize,
    pub readfrom: *mut c_void,
    pub readerr: unsafe extern "C" fn(*mut fid_cq, *mut fi_cq_err_entry, u64) -> isize,
    pub sread: *mut c_void,
    pub sreadfrom: *mut c_void,
    pub signal: *mut c_void,
    pub strerror: unsafe extern "C" fn(
        *mut fid_cq,
        c_int,
        *const c_void,
        *mut c_char,
        usize,
    ) -> *const c_char,
}

/// `struct fid_cq`.
#[repr(C)]
pub(crate) struct fid_cq {
    pub fid: fid,
    pub ops: *mut fi_ops_cq,
}

/// `struct fi_ops_cm` (up to `getname`).
#[repr(C)]
pub(crate) struct fi_ops_cm {
    pub size: usize,
    pub setname: *mut c_void,
    pub getname: unsafe extern "C" fn(*mut fid, *mut c_void, *mut usize) -> c_int,
}

/// `struct fi_ops_tagged` (up to `senddata`).
#[repr(C)]
pub(crate) struct fi_ops_tagged {
    pub size: usize,
    pub recv: unsafe extern "C" fn(
        *mut fid_ep,
        *mut c_void,
        usize,
        *mut c_void,
        FiAddr,
        u64,
        u64,
        *mut c_void,
    ) -> isize,
    pub recvv: *mut c_void,
    pub recvmsg: unsafe extern "C" fn(*mut fid_ep, *const fi_msg_tagged, u64) -> isize,
    pub send: unsafe extern "C" fn(
        *mut fid_ep,
        *const c_void,
        usize,
        *mut c_void,
        FiAddr,
        u64,
        *mut c_void,
    ) -> isize,
    pub sendv: *mut c_void,
    pub sendmsg: *mut c_void,
    pub inject: unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, FiAddr, u64) -> isize,
    pub senddata: unsafe extern "C" fn(
        *mut fid_ep,
        *const c_void,
        usize,
        *mut c_void,
        u64,
        FiAddr,
        u64,
        *mut c_void,
    ) -> isize,
}

/// `struct fi_rx_attr`.
#[repr(C)]
pub(crate) struct fi_rx_attr {
    pub caps: u64,
    pub mode: u64,
    pub op_flags: u64,
    pub msg_order: u64,
    pub comp_order: u64,
    pub total_buffered_recv: usize,
    pub size: usize,
    pub iov_limit: usize,
}

/// `struct fi_ops_msg` (up to `inject`).
#[repr(C)]
pub(crate) struct fi_ops_msg {
    pub size: usize,
    pub recv: unsafe extern "C" fn(
        *mut fid_ep,
        *mut c_void,
        usize,
        *mut c_void,
        FiAddr,
        *mut c_void,
    ) -> isize,
    pub recvv: *mut c_void,
    pub recvmsg: *mut c_void,
    pub send: unsafe extern "C" fn(
        *mut fid_ep,
        *const c_void,
        usize,
        *mut c_void,
        FiAddr,
        *mut c_void,
    ) -> isize,
    pub sendv: *mut c_void,
    pub sendmsg: *mut c_void,
    pub inject: unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, FiAddr) -> isize,
}

/// `struct fi_ops_rma` (up to `writemsg`).
#[repr(C)]
pub(crate) struct fi_ops_rma {
    pub size: usize,
    pub read: unsafe extern "C" fn(
        *mut fid_ep,
        *mut c_void,
        usize,
        *mut c_void,
        FiAddr,
        u64,
        u64,
        *mut c_void,
    ) -> isize,
    pub readv: *mut c_void,
    pub readmsg: *mut c_void,
    pub write: *mut c_void,
    pub writev: *mut c_void,
    pub writemsg: unsafe extern "C" fn(*mut fid_ep, *const fi_msg_rma, u64) -> isize,
}

/// `struct fi_rma_iov`: a piece of registered remote memory.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct fi_rma_iov {
    pub addr: u64,
    pub len: usize,
    pub key: u64,
}

/// `struct fi_msg_rma`: the description of one `fi_writemsg`.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct fi_msg_rma {
    pub msg_iov: *const libc::iovec,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: FiAddr,
    pub rma_iov: *const fi_rma_iov,
    pub rma_iov_count: usize,
    pub context: *mut c_void,
    pub data: u64,
}

/// `struct fi_msg_tagged`: the description of one `fi_trecvmsg`.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct fi_msg_tagged {
    pub msg_iov: *const libc::iovec,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: FiAddr,
    pub tag: u64,
    pub ignore: u64,
    pub context: *mut c_void,
    pub data: u64,
}

/// `struct fi_ioc`: a local buffer of `count` atomic elements.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct fi_ioc {
    pub addr: *mut c_void,
    pub count: usize,
}

/// `struct fi_rma_ioc`: `count` atomic elements of registered remote memory.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct fi_rma_ioc {
    pub addr: u64,
    pub count: usize,
    pub key: u64,
}

/// `struct fi_msg_atomic`: the description of one `fi_atomicmsg`.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct fi_msg_atomic {
    pub msg_iov: *const fi_ioc,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: FiAddr,
    pub rma_iov: *const fi_rma_ioc,
    pub rma_iov_count: usize,
    pub datatype: c_int,
    pub op: c_int,
    pub context: *mut c_void,
    pub data: u64,
}

/// `fi_ops_atomic`'s `readwrite` (`fi_fetch_atomic`).
type AtomicReadWrite = unsafe extern "C" fn(
    *mut fid_ep,
    *const c_void,
    usize,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    FiAddr,
    u64,
    u64,
    c_int,
    c_int,
    *mut c_void,
) -> isize;

/// `fi_ops_atomic`'s `compwrite` (`fi_compare_atomic`).
type AtomicCompWrite = unsafe extern "C" fn(
    *mut fid_ep,
    *const c_void,
    usize,
    *mut c_void,
    *const c_void,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    FiAddr,
    u64,
    u64,
    c_int,
    c_int,
    *mut c_void,
) -> isize;

/// `fi_ops_atomic`'s `writevalid`, `readwritevalid` and `compwritevalid`
/// (`fi_atomicvalid`, `fi_fetch_atomicvalid`, `fi_compare_atomicvalid`).
type AtomicValid = unsafe extern "C" fn(*mut fid_ep, c_int, c_int, *mut usize) -> c_int;

/// `struct fi_ops_atomic` (up to `compwritevalid`).
#[repr(C)]
pub(crate) struct fi_ops_atomic {
    pub size: usize,
    pub write: *mut c_void,
    pub writev: *mut c_void,
    pub writemsg: unsafe extern "C" fn(*mut fid_ep, *const fi_msg_atomic, u64) -> isize,
    pub inject: *mut c_void,
    pub readwrite: AtomicReadWrite,
    pub readwritev: *mut c_void,
    pub readwritemsg: *mut c_void,
    pub compwrite: AtomicCompWrite,
    pub compwritev: *mut c_void,
    pub compwritemsg: *mut c_void,
    pub writevalid: AtomicValid,
    pub readwritevalid: AtomicValid,
    pub compwritevalid: AtomicValid,
}

/// `enum fi_datatype`: the element types of atomic operations we use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum AtomicType {
    /// `FI_INT8`.
    I8 = 0,
    /// `FI_UINT8`.
    U8 = 1,
    /// `FI_INT16`.
    I16 = 2,
    /// `FI_UINT16`.
    U16 = 3,
    /// `FI_INT32`.
    I32 = 4,
    /// `FI_UINT32`.
    U32 = 5,
    /// `FI_INT64`.
    I64 = 6,
    /// `FI_UINT64`.
    U64 = 7,
    /// `FI_FLOAT`.
    F32 = 8,
    /// `FI_DOUBLE`.
    F64 = 9,
}

impl AtomicType {
    /// Bytes of one element.
    pub fn size(self) -> usize {
        match self {
            AtomicType::I8 | AtomicType::U8 => 1,
            AtomicType::I16 | AtomicType::U16 => 2,
            AtomicType::I32 | AtomicType::U32 | AtomicType::F32 => 4,
            AtomicType::I64 | AtomicType::U64 | AtomicType::F64 => 8,
        }
    }
}

/// `enum fi_op`: the atomic operations we use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum AtomicOp {
    /// `FI_MIN`.
    Min = 0,
    /// `FI_MAX`.
    Max = 1,
    /// `FI_SUM`.
    Sum = 2,
    /// `FI_PROD`.
    Prod = 3,
    /// `FI_LOR`.
    Lor = 4,
    /// `FI_LAND`.
    Land = 5,
    /// `FI_BOR`.
    Bor = 6,
    /// `FI_BAND`.
    Band = 7,
    /// `FI_LXOR`.
    Lxor = 8,
    /// `FI_BXOR`.
    Bxor = 9,
    /// `FI_ATOMIC_READ`.
    Read = 10,
    /// `FI_ATOMIC_WRITE`.
    Write = 11,
    /// `FI_CSWAP`.
    Cswap = 12,
}

/// `struct fi_ops_ep` (up to `cancel`).
#[repr(C)]
pub(crate) struct fi_ops_ep {
    pub size: usize,
    pub cancel: unsafe extern "C" fn(*mut fid, *mut c_void) -> isize,
}

/// `struct fid_ep`.
#[repr(C)]
pub(crate) struct fid_ep {
    pub fid: fid,
    pub ops: *mut fi_ops_ep,
    pub cm: *mut fi_ops_cm,
    pub msg: *mut fi_ops_msg,
    pub rma: *mut fi_ops_rma,
    pub tagged: *mut fi_ops_tagged,
    pub atomic: *mut fi_ops_atomic,
    pub collective: *mut c_void,
}

/// `struct fi_context2`: the scratch space a provider in `FI_CONTEXT`/`FI_CONTEXT2` mode
/// may use in every operation's context.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct fi_context2 {
    pub internal: [*mut c_void; 8],
}

impl Default for fi_context2 {
    fn default() -> Self {
        fi_context2 {
            internal: [std::ptr::null_mut(); 8],
        }
    }
}

/// `fi_getinfo`.
type GetInfo = unsafe extern "C" fn(
    u32,
    *const c_char,
    *const c_char,
    u64,
    *const fi_info,
    *mut *mut fi_info,
) -> c_int;
/// `fi_freeinfo`.
type FreeInfo = unsafe extern "C" fn(*mut fi_info);
/// `fi_dupinfo`.
type DupInfo = unsafe extern "C" fn(*const fi_info) -> *mut fi_info;
/// `fi_fabric`.
type FabricOpen =
    unsafe extern "C" fn(*mut fi_fabric_attr, *mut *mut fid_fabric, *mut c_void) -> c_int;
/// `fi_strerror`.
type StrError = unsafe extern "C" fn(c_int) -> *const c_char;

/// The exported functions we call, resolved from the loaded library.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lib {
    pub getinfo: GetInfo,
    pub freeinfo: FreeInfo,
    pub dupinfo: DupInfo,
    pub fabric: FabricOpen,
    pub strerror: StrError,
}

/// The file name libfabric 1.x installs its library under.
pub(crate) const LIB_NAME: &str = "libfabric.so.1";

impl Lib {
    /// Loads libfabric once per process (later calls return the first result); the
    /// loader's message if it is not installed or lacks a symbol.
    pub(crate) fn load() -> Result<&'static Lib, String> {
        static LIB: std::sync::OnceLock<Result<Lib, String>> = std::sync::OnceLock::new();
        LIB.get_or_init(|| {
            let dl = DynLib::open(LIB_NAME)?;
            let sym = |n: &str| dl.symbol(n).map(|p| p.as_ptr());
            // SAFETY: each symbol is the libfabric 1.x function of that name, whose C
            // prototype the field's type repeats (the ABI is stable within 1.x).
            unsafe {
                Ok(Lib {
                    getinfo: std::mem::transmute::<*mut c_void, GetInfo>(sym("fi_getinfo")?),
                    freeinfo: std::mem::transmute::<*mut c_void, FreeInfo>(sym("fi_freeinfo")?),
                    dupinfo: std::mem::transmute::<*mut c_void, DupInfo>(sym("fi_dupinfo")?),
                    fabric: std::mem::transmute::<*mut c_void, FabricOpen>(sym("fi_fabric")?),
                    strerror: std::mem::transmute::<*mut c_void, StrError>(sym("fi_strerror")?),
                })
            }
        })
        .as_ref()
        .map_err(Clone::clone)
    }

    /// `fi_strerror(-ret)` for a negative return code.
    pub(crate) fn error(&self, ret: isize) -> String {
        // SAFETY: fi_strerror returns a static NUL-terminated string for any number.
        let s = unsafe { (self.strerror)((-ret) as c_int) };
        if s.is_null() {
            return format!("libfabric error {ret}");
        }
        // SAFETY: non-NULL, NUL-terminated, static.
        unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
    }
}

/// A C string owned by libfabric, as text (empty for NULL).
///
/// # Safety
/// `p` is NULL or a NUL-terminated string valid for the call.
pub(crate) unsafe fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the caller's promise.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// The Rust mirrors have the size and field offsets of the installed headers' structs
    /// (checked by compiling a C program against `rdma/fabric.h`); skipped, loudly, where
    /// the headers (`libfabric-dev`, installed by `scripts/deps.sh`) are missing.
    #[test]
    fn layouts_match_the_installed_headers() {
        if !std::path::Path::new("/usr/include/rdma/fabric.h").exists() {
            eprintln!(
                "SKIPPED: libfabric headers missing (scripts/deps.sh installs libfabric-dev)"
            );
            return;
        }
        macro_rules! size {
            ($t:ident) => {
                (
                    concat!("sizeof(struct ", stringify!($t), ")"),
                    size_of::<$t>(),
                )
            };
        }
        macro_rules! off {
            ($t:ident, $f:ident) => {
                (
                    concat!(
                        "offsetof(struct ",
                        stringify!($t),
                        ", ",
                        stringify!($f),
                        ")"
                    ),
                    offset_of!($t, $f),
                )
            };
        }
        let checks: Vec<(&str, usize)> = vec![
            size!(fid),
            size!(fi_tx_attr),
            off!(fi_tx_attr, inject_size),
            size!(fi_ep_attr),
            off!(fi_ep_attr, max_msg_size),
            off!(fi_ep_attr, mem_tag_format),
            off!(fi_domain_attr, threading),
            off!(fi_domain_attr, data_progress),
            off!(fi_domain_attr, av_type),
            off!(fi_domain_attr, mr_mode),
            size!(fi_fabric_attr),
            off!(fi_fabric_attr, prov_name),
            size!(fi_info),
            off!(fi_info, caps),
            off!(fi_info, mode),
            off!(fi_info, tx_attr),
            off!(fi_info, ep_attr),
            off!(fi_info, domain_attr),
            off!(fi_info, fabric_attr),
            off!(fi_ops, close),
            off!(fi_ops, bind),
            off!(fi_ops, control),
            off!(fi_ops_fabric, domain),
            off!(fid_fabric, ops),
            size!(fi_av_attr),
            off!(fi_av_attr, count),
            off!(fi_av_attr, flags),
            size!(fi_cq_attr),
            off!(fi_cq_attr, format),
            off!(fi_cq_attr, wait_obj),
            off!(fi_cq_attr, wait_set),
            off!(fi_ops_domain, av_open),
            off!(fi_ops_domain, cq_open),
            off!(fi_ops_domain, endpoint),
            off!(fi_ops_mr, reg),
            size!(fid_domain),
            off!(fid_domain, mr),
            size!(fid_mr),
            off!(fid_mr, mem_desc),
            off!(fi_ops_av, insert),
            size!(fi_cq_tagged_entry),
            off!(fi_cq_tagged_entry, tag),
            size!(fi_cq_err_entry),
            off!(fi_cq_err_entry, err),
            off!(fi_cq_err_entry, prov_errno),
            off!(fi_cq_err_entry, err_data),
            off!(fi_ops_cq, read),
            off!(fi_ops_cq, readerr),
            off!(fi_ops_cq, strerror),
            off!(fi_ops_cm, getname),
            off!(fi_ops_tagged, recv),
            off!(fi_ops_tagged, recvmsg),
            size!(fi_msg_tagged),
            off!(fi_msg_tagged, addr),
            off!(fi_msg_tagged, ignore),
            off!(fi_msg_tagged, context),
            off!(fi_ops_ep, cancel),
            off!(fid_ep, ops),
            ("FI_PEEK", FI_PEEK as usize),
            ("FI_CLAIM", FI_CLAIM as usize),
            ("FI_ENOMSG", FI_ENOMSG as usize),
            off!(fi_ops_tagged, send),
            off!(fi_ops_tagged, inject),
            off!(fi_ops_tagged, senddata),
            size!(fid_ep),
            off!(fid_ep, cm),
            off!(fid_ep, tagged),
            off!(fid_ep, rma),
            off!(fid_mr, key),
            off!(fi_ops_rma, read),
            off!(fi_ops_rma, writemsg),
            size!(fi_rma_iov),
            off!(fi_rma_iov, key),
            size!(fi_msg_rma),
            off!(fi_msg_rma, addr),
            off!(fi_msg_rma, rma_iov),
            off!(fi_msg_rma, context),
            off!(fi_msg_rma, data),
            ("FI_WRITE", FI_WRITE as usize),
            ("FI_REMOTE_WRITE", FI_REMOTE_WRITE as usize),
            ("FI_COMPLETION", FI_COMPLETION as usize),
            ("FI_DELIVERY_COMPLETE", FI_DELIVERY_COMPLETE as usize),
            off!(fid_ep, msg),
            off!(fi_ops_msg, recv),
            off!(fi_ops_msg, send),
            off!(fi_ops_msg, inject),
            size!(fi_rx_attr),
            off!(fi_rx_attr, msg_order),
            off!(fi_tx_attr, msg_order),
            off!(fi_info, rx_attr),
            size!(fi_context2),
            ("FI_EP_RDM", FI_EP_RDM as usize),
            ("FI_AV_TABLE", FI_AV_TABLE as usize),
            ("FI_THREAD_DOMAIN", FI_THREAD_DOMAIN as usize),
            ("FI_CQ_FORMAT_TAGGED", FI_CQ_FORMAT_TAGGED as usize),
            ("FI_PROGRESS_MANUAL", FI_PROGRESS_MANUAL as usize),
            ("FI_WAIT_NONE", FI_WAIT_NONE as usize),
            ("FI_ENABLE", FI_ENABLE as usize),
            ("FI_EAVAIL", FI_EAVAIL as usize),
            ("FI_EAGAIN", FI_EAGAIN as usize),
            ("FI_CONTEXT", FI_CONTEXT as usize),
            ("FI_CONTEXT2", FI_CONTEXT2 as usize),
            ("FI_TAGGED", FI_TAGGED as usize),
            ("FI_RMA", FI_RMA as usize),
            ("FI_MSG", FI_MSG as usize),
            ("FI_DIRECTED_RECV", FI_DIRECTED_RECV as usize),
            ("FI_ORDER_SAS", FI_ORDER_SAS as usize),
            ("FI_READ", FI_READ as usize),
            ("FI_REMOTE_READ", FI_REMOTE_READ as usize),
            ("FI_MR_LOCAL", FI_MR_LOCAL as usize),
            ("FI_VERSION(1, 17)", API_VERSION as usize),
            ("FI_ATOMIC", FI_ATOMIC as usize),
            ("FI_ORDER_ATOMIC_RAW", FI_ORDER_ATOMIC_RAW as usize),
            ("FI_ORDER_ATOMIC_WAW", FI_ORDER_ATOMIC_WAW as usize),
            ("FI_MR_ENDPOINT", FI_MR_ENDPOINT as usize),
            ("FI_MR_ALLOCATED", FI_MR_ALLOCATED as usize),
            ("FI_MR_PROV_KEY", FI_MR_PROV_KEY as usize),
            ("FI_MR_VIRT_ADDR", FI_MR_VIRT_ADDR as usize),
            off!(fid_ep, atomic),
            size!(fi_ioc),
            off!(fi_ioc, count),
            size!(fi_rma_ioc),
            off!(fi_rma_ioc, key),
            size!(fi_msg_atomic),
            off!(fi_msg_atomic, rma_iov),
            off!(fi_msg_atomic, datatype),
            off!(fi_msg_atomic, op),
            off!(fi_msg_atomic, context),
            off!(fi_ops_atomic, writemsg),
            off!(fi_ops_atomic, readwrite),
            off!(fi_ops_atomic, compwrite),
            off!(fi_ops_atomic, writevalid),
            off!(fi_ops_atomic, readwritevalid),
            off!(fi_ops_atomic, compwritevalid),
            ("FI_INT8", AtomicType::I8 as usize),
            ("FI_UINT8", AtomicType::U8 as usize),
            ("FI_INT16", AtomicType::I16 as usize),
            ("FI_UINT16", AtomicType::U16 as usize),
            ("FI_INT32", AtomicType::I32 as usize),
            ("FI_UINT32", AtomicType::U32 as usize),
            ("FI_INT64", AtomicType::I64 as usize),
            ("FI_UINT64", AtomicType::U64 as usize),
            ("FI_FLOAT", AtomicType::F32 as usize),
            ("FI_DOUBLE", AtomicType::F64 as usize),
            ("FI_MIN", AtomicOp::Min as usize),
            ("FI_MAX", AtomicOp::Max as usize),
            ("FI_SUM", AtomicOp::Sum as usize),
            ("FI_PROD", AtomicOp::Prod as usize),
            ("FI_LOR", AtomicOp::Lor as usize),
            ("FI_LAND", AtomicOp::Land as usize),
            ("FI_BOR", AtomicOp::Bor as usize),
            ("FI_BAND", AtomicOp::Band as usize),
            ("FI_LXOR", AtomicOp::Lxor as usize),
            ("FI_BXOR", AtomicOp::Bxor as usize),
            ("FI_ATOMIC_READ", AtomicOp::Read as usize),
            ("FI_ATOMIC_WRITE", AtomicOp::Write as usize),
            ("FI_CSWAP", AtomicOp::Cswap as usize),
        ];
        let mut c = String::from(
            "#include <stdio.h>\n#include <stddef.h>\n#include <rdma/fabric.h>\n\
             #include <rdma/fi_domain.h>\n#include <rdma/fi_endpoint.h>\n\
             #include <rdma/fi_cm.h>\n#include <rdma/fi_tagged.h>\n#include <rdma/fi_rma.h>\n#include <rdma/fi_atomic.h>\n#include <rdma/fi_eq.h>\n\
             #include <rdma/fi_errno.h>\nint main(void) {\n",
        );
        for (expr, _) in &checks {
            c.push_str(&format!("  printf(\"%zu\\n\", (size_t)({expr}));\n"));
        }
        c.push_str("  return 0;\n}\n");
        let dir = std::env::temp_dir().join(format!("oxmpi-fi-layout-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (src, exe) = (dir.join("layout.c"), dir.join("layout"));
        std::fs::write(&src, c).unwrap();
        let cc = std::process::Command::new("cc")
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .output()
            .expect("run cc");
        let out = cc.status.success().then(|| {
            std::process::Command::new(&exe)
                .output()
                .expect("run the layout probe")
        });
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            cc.status.success(),
            "cc: {}",
            String::from_utf8_lossy(&cc.stderr)
        );
        let out = String::from_utf8(out.unwrap().stdout).unwrap();
        let got: Vec<usize> = out.lines().map(|l| l.parse().unwrap()).collect();
        assert_eq!(got.len(), checks.len());
        for ((expr, ours), theirs) in checks.iter().zip(got) {
            assert_eq!(*ours, theirs, "{expr}: Rust {ours}, C {theirs}");
        }
    }
}
