#!/usr/bin/env python3
"""Generator of oxmpi's MPI-5 standard-ABI layer (libmpi_abi.so.1).

Inputs (in crates/capi-abi/data): the MPI-5.0 C prototypes (one per line) and the table of
all named constants with their standard-ABI and MPICH-ABI values.

usage:
  gen_abi.py header  [--check]          write (or check) include/mpi_abi/mpi.h
  gen_abi.py unimplemented [--check]    write (or check) UNIMPLEMENTED.md
  gen_abi.py shim OUTDIR EXPORTS        write OUTDIR/abi_gen.c, OUTDIR/abi_mpich.h and
                                        OUTDIR/abi-unsupported.txt; EXPORTS lists the
                                        PMPI_* (and PMPIX_*) functions libmpi.so.12's
                                        archive defines

The shim defines every standard-ABI function `PMPI_X` (strong) with a weak `MPI_X` alias, and
the same for the ULFM extension's `PMPIX_X`/`MPIX_X` (MPIX_PROTOS).
Each converts its arguments to the MPICH ABI, calls `OXI_PMPI_X` (the MPICH-ABI
implementation of libmpi.so.12, renamed at link time) and converts the results back.
Functions with a hand-written conversion live in c/abi_rt.c (found by scanning it for
`ALIAS(<name>)` lines: each hand-written function has one); functions the rules below cannot convert, and those
libmpi.so.12 does not define, return MPI_ERR_UNSUPPORTED_OPERATION.
"""
import csv
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CRATE = os.path.dirname(HERE)
PROTOS = os.path.join(CRATE, "data", "mpi5-c-prototypes.txt")
CONSTS = os.path.join(CRATE, "data", "constants-abi-vs-mpich.csv")
RT = os.path.join(CRATE, "c", "abi_rt.c")
HEADER_OUT = os.path.join(CRATE, "include", "mpi_abi", "mpi.h")
UNIMPL_OUT = os.path.join(CRATE, "UNIMPLEMENTED.md")

HANDLES = ["Comm", "Datatype", "Errhandler", "File", "Group", "Info", "Message", "Op",
           "Request", "Session", "Win"]
T_HANDLES = ["MPI_T_enum", "MPI_T_cvar_handle", "MPI_T_pvar_handle", "MPI_T_pvar_session",
             "MPI_T_event_registration", "MPI_T_event_instance"]
CALLBACKS = [
    "MPI_User_function", "MPI_User_function_c", "MPI_Comm_copy_attr_function",
    "MPI_Comm_delete_attr_function", "MPI_Type_copy_attr_function",
    "MPI_Type_delete_attr_function", "MPI_Win_copy_attr_function",
    "MPI_Win_delete_attr_function", "MPI_Copy_function", "MPI_Delete_function",
    "MPI_Comm_errhandler_function", "MPI_File_errhandler_function",
    "MPI_Win_errhandler_function", "MPI_Session_errhandler_function",
    "MPI_Grequest_query_function", "MPI_Grequest_free_function",
    "MPI_Grequest_cancel_function", "MPI_Datarep_extent_function",
    "MPI_Datarep_conversion_function", "MPI_Datarep_conversion_function_c",
    "MPI_T_event_cb_function", "MPI_T_event_free_cb_function",
    "MPI_T_event_dropped_cb_function",
]
# Corrections of the prototype dump (pympistandard 0.2.0) to the standard's C binding.
FIXES = {
    "MPI_Info_create_env": "int MPI_Info_create_env(int argc, char* argv[], MPI_Info* info);",
    "MPI_Pcontrol": "int MPI_Pcontrol(const int level, ...);",
}


# ---------------------------------------------------------------- input parsing

class Param:
    def __init__(self, text):
        self.text = text.strip()
        m = re.match(r"^(.*?)(\w+)((?:\[\w*\])*)$", self.text)
        if not m:
            raise ValueError(f"cannot parse parameter '{text}'")
        base, self.name, arr = m.group(1).strip(), m.group(2), m.group(3)
        # callback typedefs are used through pointers
        if base in CALLBACKS:
            base += "*"
            self.text = f"{base} {self.name}{arr}"
        self.base = base
        self.arr = arr
        self.ctype = base + ("[]" if arr == "[]" else arr)
        self.const = base.startswith("const ")
        self.core = base.replace("const ", "").strip()


class Proto:
    def __init__(self, line):
        m = re.match(r"^(.+?)\s*\b((MPIX?)_\w+)\((.*)\);$", line.strip())
        self.ret, self.name, args = m.group(1).strip(), m.group(2), m.group(4).strip()
        # the name space: MPI (the standard) or MPIX (extensions: ULFM)
        self.ns = m.group(3)
        self.short = self.name[len(self.ns) + 1:]
        self.variadic = False
        self.params = []
        if args and args != "void":
            for a in args.split(","):
                if a.strip() == "...":
                    self.variadic = True
                else:
                    self.params.append(Param(a))

    def decl(self, prefix):
        """The declaration named `MPI_x` (prefix "MPI_") or `PMPI_x` ("PMPI_"); `MPIX_x` and
        `PMPIX_x` for an extension."""
        ps = [p.text for p in self.params] + (["..."] if self.variadic else [])
        prefix = prefix[:-4] + self.ns + "_"
        return f"{self.ret} {prefix}{self.short}({', '.join(ps) or 'void'})"

    def pname(self):
        """The profiling name (`PMPI_x`, `PMPIX_x`)."""
        return f"P{self.ns}_{self.short}"

    def weak_alias(self):
        """The `#pragma` making the user name a weak alias of the profiling name."""
        return f"#pragma weak {self.ns}_{self.short} = {self.pname()}\n"

    def fortran_only(self):
        return (re.search(r"_(c2f|f2c|c2f08|f082c|f2f08|f082f)$", self.name) is not None
                or any("Fint" in p.base or "F08" in p.base for p in self.params)
                or "Fint" in self.ret)


def load_protos():
    out = []
    for line in open(PROTOS):
        line = line.strip()
        if not line.startswith(("int ", "double ", "MPI_")):
            continue
        name = re.search(r"\b(MPI_\w+)\(", line).group(1)
        out.append(Proto(FIXES.get(name, line.replace("\\ldots", "..."))))
    return [p for p in out if not p.fortran_only()]


# ULFM, MPICH's `MPIX_` fault-tolerance extension (MPI-5.0 has no fault-tolerance chapter, so
# the standard ABI has no `MPI_Comm_revoke` & co.): `libmpi_abi.so.1` exports these as
# `libmpi.so.12` does, converted like the standard functions.
MPIX_PROTOS = [
    "int MPIX_Comm_revoke(MPI_Comm comm);",
    "int MPIX_Comm_shrink(MPI_Comm comm, MPI_Comm* newcomm);",
    "int MPIX_Comm_ishrink(MPI_Comm comm, MPI_Comm* newcomm, MPI_Request* request);",
    "int MPIX_Comm_agree(MPI_Comm comm, int* flag);",
    "int MPIX_Comm_iagree(MPI_Comm comm, int* flag, MPI_Request* request);",
    "int MPIX_Comm_failure_ack(MPI_Comm comm);",
    "int MPIX_Comm_failure_get_acked(MPI_Comm comm, MPI_Group* failedgrp);",
    "int MPIX_Comm_get_failed(MPI_Comm comm, MPI_Group* failedgrp);",
]


def load_mpix_protos():
    return [Proto(line) for line in MPIX_PROTOS]


def load_consts():
    rows = list(csv.DictReader(open(CONSTS)))
    return [(r["name"], r["c_type_in_std_abi"], r["mpi5_std_abi_value"],
             r["mpich_5.0.2_legacy_abi_value"]) for r in rows]


def mpich_int(v):
    """An MPICH handle value of the CSV as a C int literal (32-bit, sign-wrapped)."""
    x = int(v, 16) & 0xFFFFFFFF
    if x >= 0x80000000:
        x -= 1 << 32
    return str(x)


# ---------------------------------------------------------------- the header

def gen_header():
    consts = load_consts()
    protos = load_protos()
    w = []
    w.append("""/* mpi.h: the MPI-5.0 standard ABI (libmpi_abi.so.1) as implemented by oxmpi.
 *
 * Generated by crates/capi-abi/tools/gen_abi.py from the MPI-5.0 C prototypes and the
 * standard-ABI constant values; do not edit. Handles are pointers to incomplete structs,
 * predefined handles are the integers 1-4095 of the standard, MPI_Status is 32 bytes. */
#ifndef MPI_H_ABI_INCLUDED
#define MPI_H_ABI_INCLUDED

#include <stddef.h>
#include <stdint.h>

#if defined(__cplusplus)
extern "C" {
#endif

#define MPI_VERSION 5
#define MPI_SUBVERSION 0
#define MPI_ABI_VERSION 1
#define MPI_ABI_SUBVERSION 0

/* ---- handle types ---- */""")
    for h in HANDLES:
        w.append(f"typedef struct MPI_ABI_{h} *MPI_{h};")
    for t in T_HANDLES:
        w.append(f"typedef struct {t}_s *{t};")
    w.append("""
typedef intptr_t MPI_Aint;
typedef int64_t MPI_Offset;
typedef MPI_Offset MPI_Count;

typedef struct MPI_Status {
    int MPI_SOURCE;
    int MPI_TAG;
    int MPI_ERROR;
    int MPI_internal[5];
} MPI_Status;

typedef enum MPI_T_cb_safety {
    MPI_T_CB_REQUIRE_NONE = 0,
    MPI_T_CB_REQUIRE_MPI_RESTRICTED = 3,
    MPI_T_CB_REQUIRE_THREAD_SAFE = 15,
    MPI_T_CB_REQUIRE_ASYNC_SIGNAL_SAFE = 63
} MPI_T_cb_safety;

typedef enum MPI_T_source_order {
    MPI_T_SOURCE_ORDERED = 1,
    MPI_T_SOURCE_UNORDERED = 2
} MPI_T_source_order;

/* ---- callback types ---- */
typedef void (MPI_User_function)(void *invec, void *inoutvec, int *len, MPI_Datatype *datatype);
typedef void (MPI_User_function_c)(void *invec, void *inoutvec, MPI_Count *len, MPI_Datatype *datatype);
typedef int (MPI_Comm_copy_attr_function)(MPI_Comm oldcomm, int comm_keyval, void *extra_state, void *attribute_val_in, void *attribute_val_out, int *flag);
typedef int (MPI_Comm_delete_attr_function)(MPI_Comm comm, int comm_keyval, void *attribute_val, void *extra_state);
typedef int (MPI_Type_copy_attr_function)(MPI_Datatype oldtype, int type_keyval, void *extra_state, void *attribute_val_in, void *attribute_val_out, int *flag);
typedef int (MPI_Type_delete_attr_function)(MPI_Datatype datatype, int type_keyval, void *attribute_val, void *extra_state);
typedef int (MPI_Win_copy_attr_function)(MPI_Win oldwin, int win_keyval, void *extra_state, void *attribute_val_in, void *attribute_val_out, int *flag);
typedef int (MPI_Win_delete_attr_function)(MPI_Win win, int win_keyval, void *attribute_val, void *extra_state);
typedef int (MPI_Copy_function)(MPI_Comm oldcomm, int keyval, void *extra_state, void *attribute_val_in, void *attribute_val_out, int *flag);
typedef int (MPI_Delete_function)(MPI_Comm comm, int keyval, void *attribute_val, void *extra_state);
typedef void (MPI_Comm_errhandler_function)(MPI_Comm *comm, int *error_code, ...);
typedef void (MPI_File_errhandler_function)(MPI_File *file, int *error_code, ...);
typedef void (MPI_Win_errhandler_function)(MPI_Win *win, int *error_code, ...);
typedef void (MPI_Session_errhandler_function)(MPI_Session *session, int *error_code, ...);
typedef int (MPI_Grequest_query_function)(void *extra_state, MPI_Status *status);
typedef int (MPI_Grequest_free_function)(void *extra_state);
typedef int (MPI_Grequest_cancel_function)(void *extra_state, int complete);
typedef int (MPI_Datarep_extent_function)(MPI_Datatype datatype, MPI_Aint *file_extent, void *extra_state);
typedef int (MPI_Datarep_conversion_function)(void *userbuf, MPI_Datatype datatype, int count, void *filebuf, MPI_Offset position, void *extra_state);
typedef int (MPI_Datarep_conversion_function_c)(void *userbuf, MPI_Datatype datatype, MPI_Count count, void *filebuf, MPI_Offset position, void *extra_state);
typedef void (MPI_T_event_cb_function)(MPI_T_event_instance event_instance, MPI_T_event_registration event_registration, MPI_T_cb_safety cb_safety, void *user_data);
typedef void (MPI_T_event_free_cb_function)(MPI_T_event_registration event_registration, MPI_T_cb_safety cb_safety, void *user_data);
typedef void (MPI_T_event_dropped_cb_function)(MPI_Count count, MPI_T_event_registration event_registration, int source_index, MPI_T_cb_safety cb_safety, void *user_data);

/* ---- constants ---- */""")
    in_enum = {"MPI_T_CB_REQUIRE_NONE", "MPI_T_CB_REQUIRE_MPI_RESTRICTED",
               "MPI_T_CB_REQUIRE_THREAD_SAFE", "MPI_T_CB_REQUIRE_ASYNC_SIGNAL_SAFE",
               "MPI_T_SOURCE_ORDERED", "MPI_T_SOURCE_UNORDERED", "MPI_VERSION",
               "MPI_SUBVERSION"}
    for name, ctype, std, _ in consts:
        if name in in_enum:
            continue
        if ctype.startswith("alias of "):
            val = ctype[len("alias of "):]
        elif ctype.startswith("int (enum"):
            val = std if not std.startswith("-") else f"({std})"
        elif ctype.startswith("MPI_Offset"):
            val = f"((MPI_Offset){std})"
        else:
            val = f"(({ctype}){std})"
        w.append(f"#define {name} {val}")
    # MPICH's extension class for a failed peer process (MPI-5.0 has none): the library
    # reports it with MPICH's value, which the error-code conversion passes through.
    w.append("#define MPIX_ERR_PROC_FAILED 101")
    # ULFM's other classes (MPICH's values).
    w.append("#define MPIX_ERR_PROC_FAILED_PENDING 102")
    w.append("#define MPIX_ERR_REVOKED 103")
    w.append("\n/* ---- functions ---- */")
    for p in protos:
        w.append(p.decl("MPI_") + ";")
        w.append(p.decl("PMPI_") + ";")
    w.append("\n/* ---- ULFM (MPICH's MPIX_ fault-tolerance extension) ---- */")
    for p in load_mpix_protos():
        w.append(p.decl("MPI_") + ";")
        w.append(p.decl("PMPI_") + ";")
    w.append("""
#if defined(__cplusplus)
}
#endif

#endif /* MPI_H_ABI_INCLUDED */""")
    return "\n".join(w) + "\n"


# ---------------------------------------------------------------- constant tables

# Groups of integer constants converted between the two ABIs, by name prefix/list.
def const_groups(consts):
    g = {}

    def add(group, name, std, mpich):
        g.setdefault(group, []).append((name, int(std), int(mpich)))

    for name, ctype, std, mpich in consts:
        if not ctype.startswith("int (enum") or mpich == "NA":
            continue
        if name == "MPI_SUCCESS" or name.startswith(("MPI_ERR_", "MPI_T_ERR_")):
            if name != "MPI_ERR_LASTCODE":
                add("err", name, std, mpich)
        elif name.startswith("MPI_THREAD_"):
            add("thread", name, std, mpich)
        elif name in ("MPI_IDENT", "MPI_CONGRUENT", "MPI_SIMILAR", "MPI_UNEQUAL"):
            add("compare", name, std, mpich)
        elif name in ("MPI_CART", "MPI_GRAPH", "MPI_DIST_GRAPH"):
            add("topo", name, std, mpich)
        elif name.startswith("MPI_COMBINER_"):
            add("combiner", name, std, mpich)
        elif name.startswith("MPI_COMM_TYPE_"):
            add("commtype", name, std, mpich)
        elif name.startswith("MPI_ORDER_"):
            add("order", name, std, mpich)
        elif name.startswith("MPI_DISTRIBUTE_"):
            add("distrib", name, std, mpich)
        elif name.startswith("MPI_TYPECLASS_"):
            add("typeclass", name, std, mpich)
        elif name.startswith("MPI_LOCK_"):
            add("lock", name, std, mpich)
        elif name.startswith("MPI_SEEK_"):
            add("seek", name, std, mpich)
        elif name.startswith("MPI_WIN_FLAVOR_"):
            add("flavor", name, std, mpich)
        elif name in ("MPI_WIN_UNIFIED", "MPI_WIN_SEPARATE"):
            add("model", name, std, mpich)
        elif name in ("MPI_ANY_SOURCE", "MPI_PROC_NULL", "MPI_ROOT"):
            add("rank", name, std, mpich)
        elif name == "MPI_ANY_TAG":
            add("tag", name, std, mpich)
        elif name in ("MPI_KEYVAL_INVALID", "MPI_TAG_UB", "MPI_IO", "MPI_HOST",
                      "MPI_WTIME_IS_GLOBAL", "MPI_APPNUM", "MPI_LASTUSEDCODE",
                      "MPI_UNIVERSE_SIZE", "MPI_WIN_BASE", "MPI_WIN_DISP_UNIT",
                      "MPI_WIN_SIZE", "MPI_WIN_CREATE_FLAVOR", "MPI_WIN_MODEL"):
            add("keyval", name, std, mpich)
        elif name in ("MPI_MODE_APPEND", "MPI_MODE_CREATE", "MPI_MODE_DELETE_ON_CLOSE",
                      "MPI_MODE_EXCL", "MPI_MODE_RDONLY", "MPI_MODE_RDWR",
                      "MPI_MODE_SEQUENTIAL", "MPI_MODE_UNIQUE_OPEN", "MPI_MODE_WRONLY"):
            add("amode", name, std, mpich)
        elif name.startswith("MPI_MODE_"):
            add("assert", name, std, mpich)
        elif name.startswith("MPI_T_VERBOSITY_"):
            add("verbosity", name, std, mpich)
        elif name.startswith("MPI_T_BIND_"):
            add("bind", name, std, mpich)
        elif name.startswith("MPI_T_SCOPE_"):
            add("scope", name, std, mpich)
        elif name.startswith("MPI_T_PVAR_CLASS_"):
            add("pvarclass", name, std, mpich)
        elif name.startswith("MPI_T_CB_REQUIRE_"):
            add("cbsafety", name, std, mpich)
        elif name.startswith("MPI_T_SOURCE_"):
            add("sourceorder", name, std, mpich)
    return g


BITMASK_GROUPS = {"amode", "assert"}


def gen_tables(consts):
    """C functions converting constants and predefined handles."""
    w = []
    groups = const_groups(consts)
    for grp, items in sorted(groups.items()):
        if grp in ("rank", "tag"):
            continue  # hand-written in abi_rt.c (invalid values must stay invalid)
        if grp in BITMASK_GROUPS:
            for fn, a, b in (("a2i", 1, 2), ("i2a", 2, 1)):
                w.append(f"int oxa_{grp}_{fn}(int v)\n{{\n    int r = 0;")
                for it in items:
                    w.append(f"    if (v & {it[a]}) r |= {it[b]}; /* {it[0]} */")
                w.append("    return r;\n}")
            continue
        for fn, a, b in (("a2i", 1, 2), ("i2a", 2, 1)):
            w.append(f"int oxa_{grp}_{fn}(int v)\n{{\n    switch (v) {{")
            seen = set()
            for it in items:
                if it[a] in seen:
                    continue
                seen.add(it[a])
                w.append(f"    case {it[a]}: return {it[b]}; /* {it[0]} */")
            dflt = {"err": f"oxa_err_{fn}_other(v)"}.get(grp, "v")
            w.append(f"    default: return {dflt};\n    }}\n}}")
    # predefined handles: standard value -> MPICH int, per kind back
    table = {}
    per_kind = {}
    for name, ctype, std, mpich in consts:
        if ctype.startswith("alias of "):
            continue
        m = re.match(r"^MPI_(\w+)$", ctype)
        if not m or m.group(1) not in HANDLES or m.group(1) == "File":
            continue
        table[int(std, 16)] = (name, mpich_int(mpich))
        per_kind.setdefault(m.group(1), []).append((name, int(std, 16), mpich_int(mpich)))
    w.append("static const int oxa_pre_a2i[4096] = {")
    for v in sorted(table):
        w.append(f"    [{v:#x}] = {table[v][1]}, /* {table[v][0]} */")
    w.append("};")
    w.append("""int oxa_h2i(uintptr_t h)
{
    if (h < 4096) {
        int i = oxa_pre_a2i[h];
        return i ? i : OXA_INVALID_HANDLE;
    }
    if (h > 0xffffffffu)
        return OXA_INVALID_HANDLE;
    return (int)(uint32_t)h;
}""")
    for kind in HANDLES:
        if kind == "File":
            continue
        w.append(f"uintptr_t oxa_i2h_{kind.lower()}(int i)\n{{\n    switch (i) {{")
        for name, std, mp in per_kind[kind]:
            w.append(f"    case {mp}: return {std:#x}; /* {name} */")
        w.append("    default: return (uintptr_t)(uint32_t)i;\n    }\n}")
    return "\n".join(w) + "\n"


# ---------------------------------------------------------------- per-function rules

RANK_IN = {"dest", "source", "root", "target_rank", "rank"}
TAG_IN = {"tag", "sendtag", "recvtag"}
KEYVALS = {"comm_keyval", "type_keyval", "win_keyval", "keyval"}

# Length of arrays of handles/statuses, by function (without the _c suffix) and parameter.
ARRAY_LEN = {
    ("Waitall", "*"): "count", ("Testall", "*"): "count", ("Startall", "*"): "count",
    ("Waitany", "*"): "count", ("Testany", "*"): "count",
    ("Waitsome", "*"): "incount", ("Testsome", "*"): "incount",
    ("Request_get_status_all", "*"): "count", ("Request_get_status_any", "*"): "count",
    ("Request_get_status_some", "*"): "incount",
    ("Type_create_struct", "*"): "count",
    ("Type_get_contents", "*"): "max_datatypes",
    ("Group_translate_ranks", "*"): "n",
    ("Type_create_darray", "*"): "ndims",
    ("Comm_spawn_multiple", "array_of_info"): "count",
}
# Alltoallw-like: datatype arrays sized by the communicator.
COMM_SIZED = {"Alltoallw", "Ialltoallw", "Alltoallw_init"}
NEIGHBOR_SIZED = {"Neighbor_alltoallw", "Ineighbor_alltoallw", "Neighbor_alltoallw_init"}


class Unsupported(Exception):
    pass


def array_len(fn, p):
    base = re.sub(r"_c$", "", fn.short)
    if base in COMM_SIZED:
        return "oxa_comm_peers(comm)"
    if base in NEIGHBOR_SIZED:
        return ("oxa_neighbors(comm, 1)" if p.name.startswith("send")
                else "oxa_neighbors(comm, 0)")
    for key in ((base, p.name), (base, "*")):
        if key in ARRAY_LEN:
            return ARRAY_LEN[key]
    raise Unsupported(f"length of array {p.name} unknown")


def mpich_type(p):
    """The parameter's C type on the MPICH side."""
    c = p.core
    star = ""
    while c.endswith("*"):
        c, star = c[:-1].strip(), star + "*"
    cst = "const " if p.const else ""
    if c.startswith("MPI_") and c[4:] in HANDLES:
        t = "void*" if c == "MPI_File" else "int"
    elif c == "MPI_Status":
        t = "oxi_status"
    elif c in ("MPI_T_cb_safety", "MPI_T_source_order"):
        t = "int"
    elif c in CALLBACKS or c in T_HANDLES or c.startswith("MPI_T_"):
        t = "void*"
        star = star[:-1] if c in CALLBACKS else star
    else:
        t = c
    if p.arr == "[]":
        star += "*"
    elif p.arr:
        return f"{cst}{t} {star}(*){p.arr[p.arr.index(']') + 1:]}"
    return f"{cst}{t}{star}"


def convert(fn, p, pre, args, post):
    """Append the conversion code of parameter p; raise Unsupported if impossible."""
    n, c, v = p.name, p.core, p.name
    handle = c.startswith("MPI_") and c.rstrip("*").strip()[4:] in HANDLES
    hk = c.rstrip("*").strip()[4:].lower() if handle else None
    if c in CALLBACKS:
        raise Unsupported(f"parameter {n} of type {c}")
    if c.rstrip("*").strip() in T_HANDLES:
        # Pointers to opaque structures in both ABIs, with the same null value and
        # MPI_T_PVAR_ALL_HANDLES (1): passed on as they are.
        args.append(f"({mpich_type(p)}){v}")
        return
    if c == "MPI_T_cb_safety":
        args.append(f"oxa_cbsafety_a2i({v})")
        return
    if c == "MPI_T_source_order*":
        pre.append(f"int t_{n} = 0;")
        args.append(f"{v} ? &t_{n} : NULL")
        post.append(f"if ({v}) *{v} = (MPI_T_source_order)oxa_sourceorder_i2a(t_{n});")
        return
    if c.startswith("MPI_T_"):
        raise Unsupported(f"parameter {n} of type {c}")
    if handle and c == "MPI_File":
        args.append(f"oxa_file_a2i((uintptr_t){v})")
    elif handle and c == "MPI_File*" and not p.arr:
        pre.append(f"void *t_{n} = NULL;")
        pre.append(f"if ({v}) t_{n} = oxa_file_a2i((uintptr_t)*{v});")
        args.append(f"{v} ? &t_{n} : NULL")
        post.append(f"if ({v}) *{v} = (MPI_File)oxa_file_i2a(t_{n});")
    elif handle and not p.arr and not c.endswith("*"):
        args.append(f"oxa_h2i((uintptr_t){v})")
    elif handle and not p.arr and c.endswith("*") and not c.endswith("**"):
        typ = c[:-1].strip()
        pre.append(f"int t_{n} = OXA_INVALID_HANDLE;")
        pre.append(f"if ({v}) t_{n} = oxa_h2i((uintptr_t)*{v});")
        args.append(f"{v} ? &t_{n} : NULL")
        post.append(f"if ({v}) *{v} = ({typ})oxa_i2h_{hk}(t_{n});")
    elif handle and p.arr == "[]" and c != "MPI_File":
        ln = array_len(fn, p)
        pre.append(f"int n_{n} = {v} ? ({ln}) : 0;")
        pre.append(f"int s_{n}[OXA_STACK], *t_{n} = oxa_ints(s_{n}, n_{n});")
        pre.append(f"if (n_{n} > 0 && !t_{n}) return oxa_nomem();")
        pre.append(f"for (int i = 0; i < n_{n}; i++) t_{n}[i] = oxa_h2i((uintptr_t){v}[i]);")
        args.append(f"{v} ? t_{n} : NULL")
        if not p.const:
            post.append(f"for (int i = 0; i < n_{n}; i++) {v}[i] = ({c})oxa_i2h_{hk}(t_{n}[i]);")
        post.append(f"if (t_{n} != s_{n}) free(t_{n});")
    elif c == "MPI_Status*" and not p.arr:
        if p.const:
            pre.append(f"oxi_status t_{n};")
            pre.append(f"if ({v}) oxa_status_a2i({v}, &t_{n});")
            args.append(f"{v} ? &t_{n} : NULL")
        else:
            pre.append(f"oxi_status t_{n};")
            pre.append(f"if ({v} != MPI_STATUS_IGNORE) oxa_status_a2i({v}, &t_{n});")
            args.append(f"{v} != MPI_STATUS_IGNORE ? &t_{n} : OXI_STATUS_IGNORE")
            post.append(f"if ({v} != MPI_STATUS_IGNORE) oxa_status_i2a(&t_{n}, {v});")
    elif c == "MPI_Status" and p.arr == "[]":
        ln = array_len(fn, p)
        pre.append(f"int n_{n} = {v} != MPI_STATUSES_IGNORE ? ({ln}) : 0;")
        pre.append(f"oxi_status s_{n}[OXA_STACK / 4], *t_{n} = oxa_statuses(s_{n}, n_{n});")
        pre.append(f"if (n_{n} > 0 && !t_{n}) return oxa_nomem();")
        pre.append(f"for (int i = 0; i < n_{n}; i++) oxa_status_a2i(&{v}[i], &t_{n}[i]);")
        args.append(f"{v} != MPI_STATUSES_IGNORE ? t_{n} : OXI_STATUS_IGNORE")
        post.append(f"for (int i = 0; i < n_{n}; i++) oxa_status_i2a(&t_{n}[i], &{v}[i]);")
        post.append(f"if (t_{n} != s_{n}) free(t_{n});")
    elif c == "int" and not p.arr:
        if n in RANK_IN:
            args.append(f"oxa_rank_a2i({v})")
        elif n in TAG_IN:
            args.append(f"oxa_tag_a2i({v})")
        elif n == "required":
            args.append(f"oxa_thread_a2i({v})")
        elif n in ("errorcode", "errorclass") and fn.short != "Abort":
            args.append(f"oxa_err_a2i({v})")
        elif n in KEYVALS:
            args.append(f"oxa_keyval_a2i({v})")
        elif n == "split_type":
            args.append(f"oxa_commtype_a2i({v})")
        elif n == "order":
            args.append(f"oxa_order_a2i({v})")
        elif n == "typeclass":
            args.append(f"oxa_typeclass_a2i({v})")
        elif n == "lock_type":
            args.append(f"oxa_lock_a2i({v})")
        elif n == "assert":
            args.append(f"oxa_assert_a2i({v})")
        elif n == "amode":
            args.append(f"oxa_amode_a2i({v})")
        elif n == "whence":
            args.append(f"oxa_seek_a2i({v})")
        elif n == "var_class":
            args.append(f"oxa_pvarclass_a2i({v})")
        else:
            args.append(v)
    elif c == "int*" and not p.arr:
        out = {"provided": "thread", "result": "compare", "combiner": "combiner",
               "errorclass": "err", "errorcode": "err", "rank_source": "rank",
               "rank_dest": "rank", "amode": "amode", "verbosity": "verbosity",
               "bind": "bind", "scope": "scope", "var_class": "pvarclass"}.get(n)
        if not fn.short.startswith("T_") and n in ("verbosity", "bind", "scope", "var_class"):
            out = None
        if fn.short == "Topo_test" and n == "status":
            out = "topo"
        if n in KEYVALS:
            pre.append(f"int t_{n} = 0;")
            pre.append(f"if ({v}) t_{n} = oxa_keyval_a2i(*{v});")
            args.append(f"{v} ? &t_{n} : NULL")
            post.append(f"if ({v}) *{v} = oxa_keyval_i2a(t_{n});")
        elif out:
            pre.append(f"int t_{n} = 0;")
            args.append(f"{v} ? &t_{n} : NULL")
            post.append(f"if ({v}) *{v} = oxa_{out}_i2a(t_{n});")
        else:
            args.append(v)
    elif c == "int" and p.arr == "[]":
        if n in ("sourceweights", "destweights", "weights"):
            args.append(f"oxa_weights_a2i({v})")
        elif n == "ranks2":
            post.append(f"if ({v}) for (int i = 0; i < ({array_len(fn, p)}); i++) "
                        f"{v}[i] = oxa_rank_i2a({v}[i]);")
            args.append(v)
        elif n in ("array_of_distribs", "array_of_dargs", "ranks1"):
            g = {"array_of_distribs": "distrib", "array_of_dargs": "darg", "ranks1": "rank"}[n]
            ln = array_len(fn, p)
            pre.append(f"int n_{n} = {v} ? ({ln}) : 0;")
            pre.append(f"int s_{n}[OXA_STACK], *t_{n} = oxa_ints(s_{n}, n_{n});")
            pre.append(f"if (n_{n} > 0 && !t_{n}) return oxa_nomem();")
            pre.append(f"for (int i = 0; i < n_{n}; i++) t_{n}[i] = oxa_{g}_a2i({v}[i]);")
            args.append(f"{v} ? t_{n} : NULL")
            post.append(f"if (t_{n} != s_{n}) free(t_{n});")
        elif n == "array_of_errcodes":
            # MPI_ERRCODES_IGNORE is 0 in both ABIs. Written: one code per child (the
            # remote group) after a spawn, else one per process asked for.
            if fn.short == "Comm_spawn":
                asked = "maxprocs"
            else:
                pre.append(f"int a_{n} = 0;")
                pre.append("if (array_of_maxprocs) for (int i = 0; i < count; i++) "
                           f"a_{n} += array_of_maxprocs[i];")
                asked = f"a_{n}"
            args.append(v)
            post.append(f"if ({v}) {{ int n_{n} = rc == 0 && intercomm ? "
                        f"oxa_comm_peers(*intercomm) : ({asked}); "
                        f"for (int i = 0; i < n_{n}; i++) {v}[i] = oxa_err_i2a({v}[i]); }}")
        else:
            args.append(v)
    elif c in ("void*",) and not p.arr and (
            "buf" in n or n in ("origin_addr", "result_addr", "compare_addr", "buffer")):
        args.append(f"oxa_buf_a2i({v})")
    elif c == "MPI_Offset" and n == "disp" and not p.arr:
        args.append(f"oxa_disp_a2i({v})")  # MPI_DISPLACEMENT_CURRENT
    elif c == "MPI_Offset*" and n == "disp" and not p.arr:
        args.append(v)
        post.append(f"if ({v}) *{v} = oxa_disp_i2a(*{v});")
    elif c.startswith("MPI_Info") and p.arr:
        raise Unsupported(f"array of info handles {n}")
    else:
        # everything else has the same representation in both ABIs
        if c.startswith("MPI_") and c not in ("MPI_Aint", "MPI_Aint*", "MPI_Count",
                                              "MPI_Count*", "MPI_Offset", "MPI_Offset*"):
            raise Unsupported(f"parameter {n} of type {p.ctype}")
        args.append(v)


# Collectives whose count/displacement arrays have one entry per peer on every process:
# base function -> length expression.
PEER_SIZED_COUNTS = {
    "Allgatherv": "oxa_comm_peers(comm)", "Iallgatherv": "oxa_comm_peers(comm)",
    "Allgatherv_init": "oxa_comm_peers(comm)",
    "Alltoallv": "oxa_comm_peers(comm)", "Ialltoallv": "oxa_comm_peers(comm)",
    "Alltoallv_init": "oxa_comm_peers(comm)",
    "Alltoallw": "oxa_comm_peers(comm)", "Ialltoallw": "oxa_comm_peers(comm)",
    "Alltoallw_init": "oxa_comm_peers(comm)",
    "Reduce_scatter": "oxa_comm_local_size(comm)", "Ireduce_scatter": "oxa_comm_local_size(comm)",
    "Reduce_scatter_init": "oxa_comm_local_size(comm)",
}


def large_count_fallback(fn, base):
    """Body of a large-count `X_c` that libmpi.so.12 lacks, over its `X`: counts must fit
    in an int (else MPI_ERR_VALUE_TOO_LARGE); MPI_Count and MPI_Aint outputs are the same
    size. Arrays of counts are converted for the collectives of PEER_SIZED_COUNTS."""
    if len(fn.params) != len(base.params) or fn.variadic:
        raise Unsupported("no large-count fallback (signatures differ)")
    pre, args, post = [], [], []
    for pc, pb in zip(fn.params, base.params):
        v = pc.name
        if pc.name != pb.name:
            raise Unsupported("no large-count fallback (parameter names differ)")
        if pc.ctype == pb.ctype:
            convert(base, pb, pre, args, post)
        elif pc.core == "MPI_Count" and pb.core == "int" and not pc.arr and not pb.arr:
            pre.append(f"if ({v} > INT_MAX || {v} < INT_MIN) "
                       f"return oxa_fail(\"{fn.name}\", MPI_ERR_VALUE_TOO_LARGE);")
            convert(base, pb, pre, args, post)
        elif pc.core in ("MPI_Count", "MPI_Aint") and pb.core in ("MPI_Count", "MPI_Aint") \
                and not pc.arr and not pb.arr:
            args.append(v)
        elif pc.core == "MPI_Count*" and pb.core == "int*" and not pc.arr and not pb.arr:
            pre.append(f"int t_{v} = 0;")
            if v == "position":  # the only in-out count
                pre.append(f"if ({v}) {{ if (*{v} > INT_MAX || *{v} < INT_MIN) "
                           f"return oxa_fail(\"{fn.name}\", MPI_ERR_VALUE_TOO_LARGE); "
                           f"t_{v} = (int)*{v}; }}")
            args.append(f"{v} ? &t_{v} : NULL")
            post.append(f"if ({v}) *{v} = t_{v};")
        elif pc.core in ("MPI_Count*", "MPI_Aint*") and pb.core in ("MPI_Count*", "MPI_Aint*") \
                and not pc.arr and not pb.arr:
            args.append(f"({pb.core}){v}")
        elif (pc.core in ("MPI_Count", "MPI_Aint") and pb.core == "int" and pc.arr == "[]"
              and pb.arr == "[]" and pc.const and base.short in PEER_SIZED_COUNTS):
            # arrays with one entry per peer, significant on every process
            ln = PEER_SIZED_COUNTS[base.short]
            pre.append(f"int n_{v} = {v} ? ({ln}) : 0;")
            pre.append(f"int s_{v}[OXA_STACK], *t_{v} = oxa_ints(s_{v}, n_{v});")
            pre.append(f"if (n_{v} > 0 && !t_{v}) return oxa_nomem();")
            pre.append(f"for (int i = 0; i < n_{v}; i++) {{ if ({v}[i] > INT_MAX || {v}[i] < INT_MIN) "
                       f"{{ if (t_{v} != s_{v}) free(t_{v}); "
                       f"return oxa_fail(\"{fn.name}\", MPI_ERR_VALUE_TOO_LARGE); }} "
                       f"t_{v}[i] = (int){v}[i]; }}")
            args.append(f"{v} ? t_{v} : NULL")
            post.append(f"if (t_{v} != s_{v}) free(t_{v});")
        else:
            raise Unsupported(f"no large-count fallback for {pc.ctype} {v}")
    lines = ["    " + x for x in pre]
    lines.append(f"    int rc = OXI_PMPI_{base.short}({', '.join(args)});")
    lines += ["    " + x for x in post]
    lines.append("    return oxa_err_i2a(rc);")
    return "\n".join(lines)


def manual_names():
    text = open(RT).read()
    return set(re.findall(r"^ALIAS\((\w+)\)", text, re.M))


def gen_shim(outdir, exports_file):
    exports = set(l.strip() for l in open(exports_file) if l.strip())
    protos = load_protos()
    manual = manual_names()
    consts = load_consts()
    body, decls, unsupported = [], [], []
    by_name = {p.name: p for p in protos}
    for fn in protos + load_mpix_protos():
        pname = fn.pname()
        has = pname in exports
        if has:
            ps = ", ".join(mpich_type(p) for p in fn.params) or "void"
            if fn.variadic:
                ps += ", ..."
            decls.append(f"{fn.ret if fn.ret in ('int', 'double', 'MPI_Aint') else 'int'} "
                         f"OXI_{pname}({ps});")
        if fn.short in manual:
            continue
        if fn.ret in ("double", "MPI_Aint") and has:
            args = ", ".join(p.name for p in fn.params)
            body.append(f"{fn.decl('PMPI_')}\n{{\n    return OXI_{pname}({args});\n}}")
            body.append(fn.weak_alias())
            continue
        reason = None
        code = None
        base = by_name.get(fn.name[:-2]) if fn.name.endswith("_c") else None
        if not has and base and "PMPI_" + base.short in exports and base.short not in manual:
            try:
                code = large_count_fallback(fn, base)
            except Unsupported as e:
                reason = f"not implemented by libmpi.so.12; {e}"
        elif not has:
            reason = "not implemented by libmpi.so.12"
        if code is not None or reason is not None:
            pass
        elif fn.ret != "int":
            reason = "no conversion rule for the return type"
        else:
            pre, args, post = [], [], []
            try:
                for p in fn.params:
                    convert(fn, p, pre, args, post)
                lines = ["    " + x for x in pre]
                lines.append(f"    int rc = OXI_{pname}({', '.join(args)});")
                lines += ["    " + x for x in post]
                lines.append("    return oxa_err_i2a(rc);")
                code = "\n".join(lines)
            except Unsupported as e:
                reason = str(e)
        if code is None:
            unsupported.append((fn.name, reason))
            if fn.ret != "int":
                raise SystemExit(f"gen_abi: {fn.name} needs a hand-written version")
            code = f"    return oxa_unsupported(\"{fn.name}\");"
            for p in fn.params:
                code = f"    (void){p.name};\n" + code
        body.append(f"{fn.decl('PMPI_')}\n{{\n{code}\n}}")
        body.append(fn.weak_alias())
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "abi_mpich.h"), "w") as f:
        f.write("/* Generated by gen_abi.py: the MPICH-ABI functions of libmpi.so.12, renamed "
                "OXI_PMPI_*. */\n#ifndef OXA_MPICH_H\n#define OXA_MPICH_H\n")
        f.write("\n".join(decls))
        f.write("\n#endif\n")
    with open(os.path.join(outdir, "abi_gen.c"), "w") as f:
        f.write("/* Generated by crates/capi-abi/tools/gen_abi.py; do not edit. */\n")
        f.write('#include "abi_rt.h"\n#include "abi_mpich.h"\n#include <limits.h>\n'
                '#include <stdlib.h>\n\n')
        f.write(gen_tables(consts))
        f.write("\n")
        f.write("\n".join(body))
    with open(os.path.join(outdir, "abi-unsupported.txt"), "w") as f:
        for name, reason in unsupported:
            f.write(f"{name}\t{reason}\n")
    print(f"gen_abi: {len(protos)} functions, {len(manual)} hand-written, "
          f"{len(unsupported)} unsupported", file=sys.stderr)


def gen_unimplemented():
    """Functions the shim cannot convert whatever libmpi.so.12 implements."""
    protos = load_protos()
    manual = manual_names()
    rows = []
    for fn in protos:
        if fn.short in manual or fn.ret != "int":
            continue
        try:
            for p in fn.params:
                convert(fn, p, [], [], [])
        except Unsupported as e:
            rows.append((fn.name, str(e)))
    w = ["# Standard ABI (libmpi_abi.so.1): functions without a conversion", "",
         "Generated by `tools/gen_abi.py unimplemented`; a test checks it is up to date.", "",
         "These functions of the MPI-5.0 standard ABI return `MPI_ERR_UNSUPPORTED_OPERATION`",
         "(through the error handler of `MPI_COMM_WORLD`) in `libmpi_abi.so.1` because the",
         "translation layer has no conversion for one of their parameters yet. In addition,",
         "every function that `libmpi.so.12` does not implement (see",
         "`crates/capi/UNIMPLEMENTED.md` and the functions it does not export) is unsupported",
         "in the standard ABI too; the installed `share/oxmpi/abi-unsupported.txt` lists the",
         "complete set of the build. A large-count `X_c` that `libmpi.so.12` lacks is",
         "served by its `X` when all its counts are scalars that fit in an `int` (else",
         "`MPI_ERR_VALUE_TOO_LARGE`); those with arrays of counts are not.", "",
         "Known gaps of the conversions that are implemented:", "",
         "- attribute values: only the predefined `MPI_HOST`, `MPI_LASTUSEDCODE`,",
         "  `MPI_WIN_CREATE_FLAVOR` and `MPI_WIN_MODEL` are converted (in `MPI_Comm_get_attr`",
         "  and `MPI_Win_get_attr`, and the deprecated `MPI_Attr_get`);",
         "- `MPI_Type_get_contents_c` (if `libmpi.so.12` gets it) would return the integers",
         "  of darray/subarray types (order, distribution) as MPICH-ABI numbers;",
         "  `MPI_Type_get_contents` converts them;",
         "- user-defined operations and error handlers (comm, win, file, session) are limited to 64",
         "  distinct user functions of each kind per process (a fixed pool of trampolines);",
         "- `MPI_Buffer_detach` & co. return `MPI_BUFFER_AUTOMATIC` unconverted.", ""]
    if not rows:
        w.append("Functions without a conversion: none (every function of the MPI-5.0 "
                 "standard ABI has one).")
    else:
        w += ["| function | reason |", "|---|---|"]
    for name, reason in rows:
        w.append(f"| `{name}` | {reason} |")
    return "\n".join(w) + "\n"


def write_or_check(path, text, check):
    if check:
        old = open(path).read() if os.path.exists(path) else ""
        if old != text:
            print(f"{path} is out of date: run tools/gen_abi.py", file=sys.stderr)
            sys.exit(1)
    else:
        with open(path, "w") as f:
            f.write(text)


def main():
    a = sys.argv[1:]
    if not a:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    if a[0] == "header":
        write_or_check(HEADER_OUT, gen_header(), "--check" in a)
    elif a[0] == "unimplemented":
        write_or_check(UNIMPL_OUT, gen_unimplemented(), "--check" in a)
    elif a[0] == "shim" and len(a) == 3:
        gen_shim(a[1], a[2])
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
