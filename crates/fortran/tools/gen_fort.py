#!/usr/bin/env python3
"""Generator of oxmpi's Fortran bindings (libmpifort.so.12, mpif.h, the `mpi` module).

One description of the functions drives everything: the MPI-5.0 C prototypes
(crates/capi-abi/data/mpi5-c-prototypes.txt) plus data/legacy-prototypes.txt (MPI-1 and
MPI-2 functions deleted from the standard that Fortran codes still call). Constants come
from the C library's own header (crates/capi/include/mpi.h), so Fortran and C agree.

usage:
  gen_fort.py wrappers OUTDIR EXPORTS   write OUTDIR/fort_gen.c and OUTDIR/fort-unsupported.txt;
                                        EXPORTS lists the PMPI_* functions libmpi.so.12 defines
  gen_fort.py mpifh OUTDIR [EXPORTS]    write OUTDIR/mpif.h and OUTDIR/mpi.f90 (module mpi,
                                        with interfaces for the EXPORTS functions)
  (each takes --abi: the bindings over the MPI-5 standard ABI, libmpi_abi.so.1)
  gen_fort.py f08 OUTDIR EXPORTS        write OUTDIR/mpi_f08_types.f90, mpi_f08.f90 (module
                                        mpi_f08: types, constants, generic interfaces) and
                                        mpi_f08_procs.f90 (the procedures, MPICH's names
                                        MPI_X_f08 / MPI_X_f08ts, over the legacy wrappers;
                                        the large-count forms MPI_X_f08(ts)_large in the
                                        same generic interfaces, over internal C wrappers
                                        oxf_pmpi_x_c_) and fort-f08-no-large-count.txt
                                        (the MPI_X_c the generic names cannot take)

The wrappers follow MPICH's Fortran ABI (gfortran conventions): every argument by
reference, the `ierror` argument last, hidden `size_t` lengths of CHARACTER arguments after
it, handles are the C handles (MPICH handles are `int`; `MPI_File` goes through
`MPI_File_f2c`/`_c2f`), LOGICAL is 0/1 like C, the Fortran status is the C status (5
integers). The sentinels MPI_BOTTOM, MPI_IN_PLACE, MPI_STATUS(ES)_IGNORE,
MPI_ERRCODES_IGNORE, MPI_UNWEIGHTED and MPI_WEIGHTS_EMPTY are recognised by address in
MPICH's common blocks (mpipriv1_, mpipriv2_, mpifcmb5_, mpifcmb9_). Each function
`MPI_X` is defined once as `pmpi_x_` (calling the C `MPI_X`, so C-level profiling tools
see Fortran calls) with the names `pmpi_x`, `pmpi_x__`, `PMPI_X` and the weak names
`mpi_x`, `mpi_x_`, `mpi_x__`, `MPI_X`.

Functions with a hand-written wrapper in c/fort_rt.c (marked by a `FORT_HAND(MPI_X, ...)` line)
are skipped here; functions whose arguments the rules below cannot convert get a wrapper
that reports MPI_ERR_UNSUPPORTED_OPERATION through MPI_COMM_WORLD's error handler and are
listed in fort-unsupported.txt.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CRATE = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(CRATE))
PROTOS = [os.path.join(ROOT, "crates", "capi-abi", "data", "mpi5-c-prototypes.txt"),
          os.path.join(CRATE, "data", "legacy-prototypes.txt")]
RT = os.path.join(CRATE, "c", "fort_rt.c")
MPI_H = os.path.join(ROOT, "crates", "capi", "include", "mpi.h")
ABI_H = os.path.join(ROOT, "crates", "capi-abi", "include", "mpi_abi", "mpi.h")


def header():
    """The C header whose values the Fortran constants take."""
    return ABI_H if ABI else MPI_H


def status_layout():
    """(MPI_STATUS_SIZE, 1-based index of MPI_SOURCE, MPI_TAG, MPI_ERROR): the Fortran
    status is the C status in both ABIs."""
    return (8, 1, 2, 3) if ABI else (5, 3, 4, 5)

INT_HANDLES = ["MPI_Comm", "MPI_Datatype", "MPI_Errhandler", "MPI_Group", "MPI_Info",
               "MPI_Message", "MPI_Op", "MPI_Request", "MPI_Session", "MPI_Win"]
INTS = ["int"] + INT_HANDLES
WIDE = ["MPI_Aint", "MPI_Offset", "MPI_Count"]
# The `Name` of each handle type in MPI_<Name>_toint (and fort_rt.h's OXF_H/OXF_F).
HANDLE_KIND = {"MPI_Comm": "Comm", "MPI_Datatype": "Type", "MPI_Errhandler": "Errhandler",
               "MPI_File": "File", "MPI_Group": "Group", "MPI_Info": "Info",
               "MPI_Message": "Message", "MPI_Op": "Op", "MPI_Request": "Request",
               "MPI_Session": "Session", "MPI_Win": "Win"}
# Integer arguments giving the length of a handle array (converted one by one over the
# standard ABI).
ARRAY_LENGTHS = ("count", "incount", "max_datatypes")
# Set by --abi: bindings over the MPI-5 standard ABI (libmpi_abi.so.1), where C handles
# are pointers converted with MPI_<Name>_toint/_fromint and the status has 8 integers.
ABI = False

# Predefined attribute keys whose Fortran value is the C key + 1 (MPICH's convention, so
# Fortran reads the value, not a pointer to it).
FORTRAN_KEYVAL_OFFSET = 1


class Unsupported(Exception):
    """An argument the generic rules cannot convert."""


def parse_protos():
    """[(return type, name, [(type, name, array)])] in file order, later files appended."""
    out = []
    for path in PROTOS:
        if not os.path.exists(path):
            continue
        for line in open(path):
            line = line.strip().rstrip(";")
            if not line or line.startswith("#"):
                continue
            m = re.match(r"(.+?)\s*\b(MPI_\w+)\((.*)\)$", line)
            if not m:
                continue
            ret, name, args = m.groups()
            params = []
            if args not in ("void", ""):
                for a in args.split(", "):
                    if a == "...":
                        params.append(("...", "", ""))
                        continue
                    am = re.match(r"(.*?)(\w+)((?:\[\w*\])*)$", a)
                    params.append((am.group(1).strip(), am.group(2), am.group(3)))
            out.append((ret.strip(), name, params))
    return out


def skipped(name, params):
    """Functions with no Fortran binding at all."""
    if name.startswith(("MPI_T_", "MPI_Abi_")) or name.endswith("_c"):
        return True
    if re.search(r"_(c2f|f2c|toint|fromint|c2f08|f082c|f082f|f2f08)$", name):
        return True
    return any(t.endswith(("MPI_Fint*", "MPI_F08_status*")) or t == "MPI_Fint"
               for t, _, _ in params)


def hand_written():
    names = set()
    for line in open(RT):
        m = re.match(r"\s*FORT_HAND\((MPI_\w+(?:,\s*MPI_\w+)*)\)", line)
        if m:
            names.update(n.strip() for n in m.group(1).split(","))
    return names


def convert(fname, ctype, pname, array, params=()):
    """(Fortran-side parameter declaration, before-call code, call expression, after-call
    code, hidden length parameter or None) for one C parameter; `array` is the parameter's
    array suffix (`[]`, `[][3]`) or ''."""
    base = ctype.replace("const ", "").strip()
    const = ctype.startswith("const ")
    ptr = base.endswith("*") or array
    core = base.rstrip("*").strip()
    if fname == "MPI_Info_create_env" and pname in ("argc", "argv"):
        # The Fortran form has no command line arguments.
        return None, "", "0" if pname == "argc" else "NULL", "", None
    if core in HANDLE_KIND and not ptr:
        return f"MPI_Fint *{pname}", "", f"OXF_H({HANDLE_KIND[core]}, *{pname})", "", None
    if core == "int" and not ptr:
        return f"MPI_Fint *{pname}", "", f"*{pname}", "", None
    if core in WIDE and not ptr:
        return f"{core} *{pname}", "", f"*{pname}", "", None
    if core in HANDLE_KIND and base == f"{core}*" and not array and (ABI or core == "MPI_File"):
        kind = HANDLE_KIND[core]
        init = f"OXF_H({kind}, *{pname})" if fname != "MPI_File_open" else "MPI_FILE_NULL"
        pre = f"    {core} {pname}_c = {init};\n"
        post = f"    if (rc == MPI_SUCCESS) *{pname} = OXF_F({kind}, {pname}_c);\n"
        return f"MPI_Fint *{pname}", pre, f"&{pname}_c", post, None
    if core in HANDLE_KIND and ABI and base == core and array == "[]":
        kind = HANDLE_KIND[core]
        n = next((p for _, p, a in params if p in ARRAY_LENGTHS and not a), None)
        if n is None:
            raise Unsupported(f"{ctype} {pname}[] (no length for the conversion)")
        pre = (f"    {core} *{pname}_c = oxf_handles(*{n}, sizeof *{pname}_c);\n"
               f"    for (int i = 0; i < *{n}; i++) {pname}_c[i] = OXF_H({kind}, {pname}[i]);\n")
        post = ""
        if not const:
            post = (f"    for (int i = 0; i < *{n}; i++) "
                    f"{pname}[i] = OXF_F({kind}, {pname}_c[i]);\n")
        post += f"    free({pname}_c);\n"
        return f"MPI_Fint *{pname}", pre, f"{pname}_c", post, None
    if core in INTS + WIDE and ptr and base.count("*") + int(bool(array)) == 1:
        # `int ranges[][3]` is a pointer to arrays of 3.
        inner = array[array.index("]") + 1:] if array else ""
        cast = f"{core} (*){inner}" if inner else f"{core} *"
        arg = f"({'const ' if const else ''}{cast}){pname}"
        if "weights" in pname:
            arg = f"FWEIGHTS({pname}, {'const ' if const else ''}{core} *)"
        return f"void *{pname}", "", arg, "", None
    if core == "MPI_Status" and ptr:
        if const:
            return f"void *{pname}", "", f"(const MPI_Status *){pname}", "", None
        return f"void *{pname}", "", f"FSTATUS({pname})", "", None
    if core == "void" and base == "void*":
        if pname in ("extra_state", "attribute_val"):
            raise Unsupported(pname)
        if pname == "buffer_addr":
            # MPICH discards the detached address in Fortran: the argument is a choice
            # buffer, possibly smaller than a pointer.
            return f"void *{pname}", f"    void *{pname}_c = NULL;\n", f"&{pname}_c", \
                f"    (void){pname}_c;\n", None
        return f"void *{pname}", "", f"FBUF({pname})", "", None
    if (base == "char*" and not array) or (base == "char" and array == "[]"):
        if const or fname == "MPI_Pack_external_size":
            trim = 1 if pname in ("key", "value") else 0
            pre = f"    char *{pname}_c = oxf_str_in({pname}, {pname}_len, {trim});\n"
            post = f"    free({pname}_c);\n"
            return f"const char *{pname}", pre, f"{pname}_c", post, f"size_t {pname}_len"
        pre = f"    char *{pname}_c = oxf_str_buf({pname}_len);\n"
        post = f"    oxf_str_out({pname}, {pname}_len, {pname}_c, rc);\n"
        return f"char *{pname}", pre, f"{pname}_c", post, f"size_t {pname}_len"
    raise Unsupported(f"{ctype} {pname}")


def lower(name):
    return name.lower()


def aliases(name):
    """`#pragma weak` lines giving `pmpi_x_`'s other names."""
    low = lower(name)
    impl = "p" + low + "_"
    names = ["p" + low, "p" + low + "__", "P" + name.upper(),
             low, low + "_", low + "__", name.upper()]
    return "".join(f"#pragma weak {n} = {impl}\n" for n in names)


def wrapper(ret, name, params, impl=None):
    """C source of one wrapper (named `impl`, by default `pmpi_x_`), or raises Unsupported."""
    impl = impl or "p" + lower(name) + "_"
    if ret in ("double", "MPI_Aint"):
        decls = []
        call = []
        for t, p, arr in params:
            d, pre, c, post, hid = convert(name, t, p, arr, params)
            if pre or post or hid:
                raise Unsupported(p)
            decls.append(d)
            call.append(c)
        return (f"{ret} {impl}({', '.join(decls) or 'void'});\n"
                f"{ret} {impl}({', '.join(decls) or 'void'})\n{{\n"
                f"    return {name}({', '.join(call)});\n}}\n")
    if ret != "int" or any(t == "..." for t, _, _ in params):
        raise Unsupported("return type or varargs")
    decls, pres, calls, posts, hidden = [], [], [], [], []
    for t, p, arr in params:
        d, pre, c, post, hid = convert(name, t, p, arr, params)
        if d is not None:
            decls.append(d)
        pres.append(pre)
        calls.append(c)
        posts.append(post)
        if hid:
            hidden.append(hid)
    sig = ", ".join(decls + ["MPI_Fint *ierr"] + hidden)
    return (f"void {impl}({sig});\n"
            f"void {impl}({sig})\n{{\n"
            + "".join(pres)
            + f"    int rc = {name}({', '.join(calls)});\n"
            + "".join(posts)
            + "    if (ierr) *ierr = rc;\n}\n")


def unsupported_stub(name, params):
    """A wrapper reporting MPI_ERR_UNSUPPORTED_OPERATION; Fortran passes every argument by
    address, so the `ierror` address follows the arguments (hidden lengths come after)."""
    impl = "p" + lower(name) + "_"
    args = [f"void *a{i}" for i in range(len(params))] + ["MPI_Fint *ierr"]
    sig = ", ".join(args)
    return (f"void {impl}({sig});\n"
            f"void {impl}({sig})\n{{\n"
            + "".join(f"    (void)a{i};\n" for i in range(len(params)))
            + f"    oxf_unsupported(\"{name}\", ierr);\n}}\n")


def fortran_functions(exports_file):
    """[(ret, name, params, kind)] of every function with a Fortran form, in prototype
    order; kind is 'generated', 'hand' or 'unsupported' (with the reason as a 5th item)."""
    exports = {l.strip() for l in open(exports_file) if l.strip()}
    hand = hand_written()
    seen = set()
    out = []
    for ret, name, params in parse_protos():
        if name in seen or skipped(name, params) or "P" + name not in exports:
            continue
        seen.add(name)
        if name in hand:
            out.append((ret, name, params, "hand", ""))
            continue
        try:
            wrapper(ret, name, params)
            out.append((ret, name, params, "generated", ""))
        except Unsupported as e:
            out.append((ret, name, params, "unsupported", str(e)))
    return out


def large_impl(name):
    """Name of the internal C wrapper of a large-count function `MPI_X_c` (`oxf_pmpi_x_c_`):
    only `mpi_f08` calls it (Fortran has no legacy `_c` names; MPICH exports none either),
    so the library does not export it."""
    return "oxf_p" + lower(name) + "_"


def large_count_functions(exports_file):
    """{base name: (ret, name, params) or the reason it has no wrapper} of the large-count
    functions `MPI_X_c` the C library defines whose base function `MPI_X` has a Fortran
    form."""
    exports = {l.strip() for l in open(exports_file) if l.strip()}
    bases = {name for _, name, _, kind, _ in fortran_functions(exports_file)
             if kind != "unsupported"}
    out = {}
    for ret, name, params in parse_protos():
        base = name[:-2]
        if not name.endswith("_c") or base not in bases or "P" + name not in exports:
            continue
        try:
            wrapper(ret, name, params, large_impl(name))
            out[base] = (ret, name, params)
        except Unsupported as e:
            out[base] = str(e)
    return out


def mpich_f08_constants():
    """C definitions of the handle constants of MPICH's module `mpi_f08_compile_constants`
    under gfortran's names (`__mpi_f08_compile_constants_MOD_mpi_comm_world`): gfortran
    references a derived-type constant as data when a program passes it as an argument,
    so programs built against MPICH's `mpi_f08` need them from libmpichfort.so.12."""
    out = ["/* MPICH's mpi_f08_compile_constants (see c/mpich_f08.c). */\n"]
    consts = [(n, v) for n, v, _, t in c_constants(typed=True) if t in F08_HANDLES]
    # MPI_FILE_NULL is 0 in Fortran; MPI_LB and MPI_UB (deleted in MPI-3, not in our
    # header) keep MPICH's values, which the C library rejects as unknown datatypes.
    extra = [("MPI_FILE_NULL", 0), ("MPI_LB", 0x4c000010), ("MPI_UB", 0x4c000011)]
    for i, (name, val) in enumerate(consts + extra):
        sym = f"__mpi_f08_compile_constants_MOD_{name.lower()}"
        out.append(f"extern const MPI_Fint oxf_cc{i} __asm__(\"{sym}\");\n"
                   f"const MPI_Fint oxf_cc{i} = {val};\n")
    return "".join(out)


def gen_wrappers(outdir, exports_file):
    body = []
    unsupported = []
    for ret, name, params, kind, why in fortran_functions(exports_file):
        if kind == "hand":
            continue
        if kind == "generated":
            src = wrapper(ret, name, params)
        else:
            src = unsupported_stub(name, params)
            unsupported.append(f"{name}: {why}")
        body.append(src + aliases(name))
    for f in large_count_functions(exports_file).values():
        if not isinstance(f, str):
            ret, name, params = f
            body.append(wrapper(ret, name, params, large_impl(name)))
    if not ABI:
        body.append(mpich_f08_constants())
    with open(os.path.join(outdir, "fort_gen.c"), "w") as f:
        f.write("/* Generated by crates/fortran/tools/gen_fort.py: do not edit. */\n"
                "#include \"fort_rt.h\"\n\n")
        f.write("\n".join(body))
    with open(os.path.join(outdir, "fort-unsupported.txt"), "w") as f:
        f.write("".join(u + "\n" for u in sorted(unsupported)))


# ---------------------------------------------------------------- mpif.h and module mpi

# Handle and integer constants of mpi.h that are C-only.
C_ONLY = {"MPI_VERSION", "MPI_SUBVERSION", "MPI_F_STATUS_SIZE", "MPI_F_SOURCE",
          "MPI_F_TAG", "MPI_F_ERROR", "MPI_FILE_NULL"}
KEYVALS = {"MPI_TAG_UB", "MPI_HOST", "MPI_IO", "MPI_WTIME_IS_GLOBAL", "MPI_APPNUM",
           "MPI_LASTUSEDCODE", "MPI_UNIVERSE_SIZE", "MPI_WIN_BASE", "MPI_WIN_DISP_UNIT",
           "MPI_WIN_SIZE", "MPI_WIN_CREATE_FLAVOR", "MPI_WIN_MODEL"}
HANDLE_CAST = re.compile(r"^\(\((MPI_\w+)\)\s*(-?(?:0x[0-9a-fA-F]+|\d+))\)$")


def c_constants(typed=False):
    """[(name, int value, kind)] of the integer-valued constants of mpi.h, in order; kind is
    None for default INTEGER or 'MPI_OFFSET_KIND'. With `typed`, a 4th item gives the C
    handle type of handle constants (else None)."""
    defs = {}
    order = []
    for line in open(header()):
        m = re.match(r"#define\s+(MPI_\w+)\s+(.+?)\s*$", line)
        if m:
            defs[m.group(1)] = m.group(2)
            order.append(m.group(1))
    out = []

    def value(expr, depth=0):
        if depth > 4:
            return None
        if re.fullmatch(r"-?\d+", expr) or re.fullmatch(r"\(-?\d+\)", expr):
            return int(expr.strip("()")), None, None
        m = HANDLE_CAST.match(expr)
        if m:
            t, v = m.groups()
            v = int(v, 0)
            if t in INT_HANDLES or (ABI and t == "MPI_File"):
                if v >= 1 << 31:
                    v -= 1 << 32
                return v, None, t
            if t == "MPI_Offset":
                return v, "MPI_OFFSET_KIND", None
            return None
        if expr in defs:
            return value(defs[expr], depth + 1)
        return None

    for n in order:
        if n in C_ONLY and not (ABI and n == "MPI_FILE_NULL"):
            continue
        v = value(defs[n])
        if v is None:
            continue
        val, kind, ctype = v
        if n in KEYVALS and not ABI:
            val += FORTRAN_KEYVAL_OFFSET
        out.append((n, val, kind, ctype) if typed else (n, val, kind))
    return out


def c_version():
    """(MPI_VERSION, MPI_SUBVERSION) of the C header."""
    v = {}
    for line in open(header()):
        m = re.match(r"#define\s+(MPI_VERSION|MPI_SUBVERSION)\s+(\d+)", line)
        if m:
            v[m.group(1)] = int(m.group(2))
    return v["MPI_VERSION"], v["MPI_SUBVERSION"]


def fixed(line):
    """A line valid in fixed and free source form (column 7, at most 72 columns)."""
    if len(line) > 72:
        raise SystemExit(f"gen_fort.py: mpif.h line longer than 72 columns: {line}")
    return line + "\n"


def fortran_shape(fname, ctype, pname, array):
    """(C type without const, const?, base type, pointer?, Fortran dimensions, Fortran
    intent clause) of a C parameter, or None when the Fortran forms have no such argument
    (varargs, the command line of MPI_Init and MPI_Info_create_env)."""
    base = ctype.replace("const ", "").strip()
    const = ctype.startswith("const ")
    core = base.rstrip("*").strip()
    ptr = base.endswith("*")
    if ctype in ("...", "\\") or base == "char***" or (pname == "argc" and base == "int*"):
        return None
    if fname == "MPI_Info_create_env" and pname in ("argc", "argv"):
        return None
    dims = ""
    if array:
        inner = array[array.index("]") + 1:]
        dims = f"({inner.strip('[]')},*)" if inner else "(*)"
    intent = ", intent(in)" if (not ptr and not array) or const else ""
    return base, const, core, ptr, dims, intent


def legacy_param(fname, ctype, pname, array):
    """(declaration, takes any type) of one argument of the `mpi` module's interface of
    `fname`, or None when the Fortran form has no such argument."""
    shape = fortran_shape(fname, ctype, pname, array)
    if shape is None:
        return None
    base, const, core, ptr, dims, intent = shape
    if base == "void*" and pname in ADDRESS_VALUES:
        return f"integer(kind=MPI_ADDRESS_KIND) :: {pname}", False
    if base == "void*" or "weights" in pname:
        # Choice buffers, addresses, and the weights that may be MPI_UNWEIGHTED (a scalar).
        return f"type(*), dimension(*) :: {pname}", True
    if core in F08_HANDLES or core == "int":
        t = "logical" if pname in LOGICALS else "integer"
        return f"{t}{intent} :: {pname}{dims}", False
    if core in KIND_OF:
        return f"integer(kind={KIND_OF[core]}){intent} :: {pname}{dims}", False
    if core == "MPI_Status":
        d = "(MPI_STATUS_SIZE,*)" if array else "(MPI_STATUS_SIZE)"
        return f"integer{intent} :: {pname}{d}", False
    if (base == "char*" and not array) or (base == "char" and array == "[]"):
        return f"character(len=*){intent} :: {pname}", False
    if core.endswith("_function") or core.endswith("_fn"):
        return f"external :: {pname}", False
    raise Unsupported(f"{ctype} {pname}")


def legacy_interfaces(exports_file):
    """The `mpi` module's interface blocks, one per function (MPICH's `use mpi` has explicit
    interfaces too); choice buffers take any type and rank (gfortran's NO_ARG_CHECK)."""
    if exports_file is None:
        return []
    out = ["  interface\n"]
    for ret, name, params, kind, _ in fortran_functions(exports_file):
        if kind == "unsupported" or name in DELETED:
            continue
        decls, names, any_type = [], [], []
        for t, p, arr in params:
            r = legacy_param(name, t, p, arr)
            if r is None:
                continue
            decls.append(r[0])
            names.append(p)
            if r[1]:
                any_type.append(p)
        if ret in ("double", "MPI_Aint"):
            rtype = "double precision" if ret == "double" else "integer(kind=MPI_ADDRESS_KIND)"
            head, end = f"{rtype} function {name}({', '.join(names)})", f"end function {name}"
        else:
            head = f"subroutine {name}({', '.join(names + ['ierror'])})"
            end = f"end subroutine {name}"
            decls.append("integer :: ierror")
        out.append(wrap_f(f"    {head}", "    ") + "\n")
        out.append("      import :: MPI_ADDRESS_KIND, MPI_OFFSET_KIND, MPI_COUNT_KIND, "
                   "MPI_STATUS_SIZE\n")
        out.append("      implicit none\n")
        out.extend(f"      !GCC$ ATTRIBUTES NO_ARG_CHECK :: {p}\n" for p in any_type)
        out.extend(f"      {d}\n" for d in decls)
        out.append(f"    {end}\n")
    out.append("  end interface\n")
    return out


# MPI_SIZEOF's types: (Fortran type, kind, specific procedure's suffix).
SIZEOF_TYPES = [("integer", k, f"i{k}") for k in (1, 2, 4, 8, 16)] + \
    [("real", k, f"r{k}") for k in (4, 8, 16)] + \
    [("complex", k, f"c{k}") for k in (4, 8, 16)] + \
    [("logical", k, f"l{k}") for k in (1, 2, 4, 8)]


def sizeof_procedures(optional_ierror):
    """MPI_SIZEOF: a generic interface over one module procedure per intrinsic type and
    kind, for scalars and arrays of any rank (the lines end the module's specification
    part and open its `contains` part)."""
    out = ["  interface MPI_Sizeof"]
    out += [f"    module procedure oxf_sizeof_{sfx}" for _, _, sfx in SIZEOF_TYPES]
    out += ["  end interface MPI_Sizeof", "contains"]
    opt = "optional, " if optional_ierror else ""
    for t, k, sfx in SIZEOF_TYPES:
        out += [f"  subroutine oxf_sizeof_{sfx}(x, size, ierror)",
                f"    {t}(kind={k}), dimension(..), intent(in) :: x",
                "    integer, intent(out) :: size",
                f"    integer, {opt}intent(out) :: ierror",
                "    size = storage_size(x) / 8",
                ("    if (present(ierror)) ierror = 0" if optional_ierror else "    ierror = 0"),
                f"  end subroutine oxf_sizeof_{sfx}"]
    return out


def gen_mpifh(outdir, exports_file=None):
    lines = ["! mpif.h of oxmpi, generated by crates/fortran/tools/gen_fort.py from mpi.h.\n",
             "! Valid in fixed and free source form; MPICH-compatible values.\n"]
    add = lambda s: lines.append(fixed("      " + s))
    size, src, tag, err = status_layout()
    version, subversion = c_version()
    add("INTEGER MPI_VERSION, MPI_SUBVERSION")
    add(f"PARAMETER (MPI_VERSION={version}, MPI_SUBVERSION={subversion})")
    add("INTEGER MPI_STATUS_SIZE")
    add(f"PARAMETER (MPI_STATUS_SIZE={size})")
    add("INTEGER MPI_SOURCE, MPI_TAG, MPI_ERROR")
    add(f"PARAMETER (MPI_SOURCE={src}, MPI_TAG={tag}, MPI_ERROR={err})")
    add("INTEGER MPI_ADDRESS_KIND, MPI_OFFSET_KIND, MPI_COUNT_KIND")
    add("PARAMETER (MPI_ADDRESS_KIND=8, MPI_OFFSET_KIND=8)")
    add("PARAMETER (MPI_COUNT_KIND=8)")
    add("INTEGER MPI_INTEGER_KIND")
    add("PARAMETER (MPI_INTEGER_KIND=4)")
    seen = {"MPI_VERSION", "MPI_SUBVERSION", "MPI_STATUS_SIZE"}
    if not ABI:
        # MPI_File is a pointer in MPICH's C ABI; its Fortran null handle is 0.
        add("INTEGER MPI_FILE_NULL")
        add("PARAMETER (MPI_FILE_NULL=0)")
        seen.add("MPI_FILE_NULL")
    for name, val, kind in c_constants():
        if name.upper() in seen:
            continue
        seen.add(name.upper())
        if kind:
            add(f"INTEGER(KIND={kind}) {name}")
        else:
            add(f"INTEGER {name}")
        add(f"PARAMETER ({name}={val})" if val >= 0 else f"PARAMETER ({name}=({val}))")
    add("LOGICAL MPI_SUBARRAYS_SUPPORTED, MPI_ASYNC_PROTECTS_NONBLOCKING")
    add("PARAMETER (MPI_SUBARRAYS_SUPPORTED=.FALSE.)")
    add("PARAMETER (MPI_ASYNC_PROTECTS_NONBLOCKING=.FALSE.)")
    # Sentinels: MPICH's common blocks, recognised by address in the library.
    add("INTEGER MPI_BOTTOM, MPI_IN_PLACE")
    add("INTEGER MPI_STATUS_IGNORE(MPI_STATUS_SIZE)")
    add("INTEGER MPI_STATUSES_IGNORE(MPI_STATUS_SIZE,1)")
    add("INTEGER MPI_ERRCODES_IGNORE(1)")
    add("CHARACTER*1 MPI_ARGVS_NULL(1,1)")
    add("CHARACTER*1 MPI_ARGV_NULL(1)")
    add("INTEGER MPI_UNWEIGHTED, MPI_WEIGHTS_EMPTY")
    add("COMMON /MPIFCMB5/ MPI_UNWEIGHTED")
    add("COMMON /MPIFCMB9/ MPI_WEIGHTS_EMPTY")
    add("SAVE /MPIFCMB5/, /MPIFCMB9/")
    add("COMMON /MPIPRIV1/ MPI_BOTTOM, MPI_IN_PLACE, MPI_STATUS_IGNORE")
    add("COMMON /MPIPRIV2/ MPI_STATUSES_IGNORE, MPI_ERRCODES_IGNORE")
    add("SAVE /MPIPRIV1/, /MPIPRIV2/")
    add("COMMON /MPIPRIVC/ MPI_ARGVS_NULL, MPI_ARGV_NULL")
    add("SAVE /MPIPRIVC/")
    # Predefined callbacks, then the functions (which the `mpi` module declares through
    # its interfaces instead).
    add("EXTERNAL MPI_DUP_FN, MPI_NULL_DELETE_FN, MPI_NULL_COPY_FN")
    add("EXTERNAL MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN")
    add("EXTERNAL MPI_COMM_NULL_COPY_FN")
    add("EXTERNAL MPI_WIN_DUP_FN, MPI_WIN_NULL_DELETE_FN")
    add("EXTERNAL MPI_WIN_NULL_COPY_FN")
    add("EXTERNAL MPI_TYPE_DUP_FN, MPI_TYPE_NULL_DELETE_FN")
    add("EXTERNAL MPI_TYPE_NULL_COPY_FN")
    add("EXTERNAL MPI_CONVERSION_FN_NULL")
    declarations = len(lines)
    add("DOUBLE PRECISION MPI_WTIME, MPI_WTICK")
    add("DOUBLE PRECISION PMPI_WTIME, PMPI_WTICK")
    add("EXTERNAL MPI_WTIME, MPI_WTICK, PMPI_WTIME, PMPI_WTICK")
    add("INTEGER(KIND=MPI_ADDRESS_KIND) MPI_AINT_ADD, MPI_AINT_DIFF")
    add("EXTERNAL MPI_AINT_ADD, MPI_AINT_DIFF")
    with open(os.path.join(outdir, "mpif.h"), "w") as f:
        f.write("".join(lines))
    with open(os.path.join(outdir, "mpi.f90"), "w") as f:
        f.write("! module mpi of oxmpi, generated by crates/fortran/tools/gen_fort.py: mpif.h's\n"
                "! declarations and an explicit interface for every procedure.\n"
                "module mpi\n"
                "  implicit none\n")
        f.write("".join(lines[2:declarations]))
        f.write("".join(legacy_interfaces(exports_file)))
        f.write("".join(l + "\n" for l in sizeof_procedures(optional_ierror=False)))
        f.write("end module mpi\n")


# ---------------------------------------------------------------- module mpi_f08

# Functions deleted from the standard (MPI-1 forms with INTEGER addresses and attribute
# values): Fortran has them through mpif.h's implicit interfaces only.
DELETED = {"MPI_Address", "MPI_Type_struct", "MPI_Type_hindexed", "MPI_Type_hvector",
           "MPI_Type_extent", "MPI_Type_lb", "MPI_Type_ub", "MPI_Keyval_create",
           "MPI_Keyval_free", "MPI_Attr_put", "MPI_Attr_get", "MPI_Attr_delete",
           "MPI_Errhandler_create", "MPI_Errhandler_set", "MPI_Errhandler_get"}
# C parameters that are Fortran LOGICAL.
LOGICALS = {"flag", "commute", "reorder", "periods", "remain_dims", "weighted"}
# `void *` parameters that are not choice buffers.
C_PTRS = {"baseptr", "buffer_addr"}
ADDRESS_VALUES = {"extra_state", "attribute_val"}
KIND_OF = {"MPI_Aint": "MPI_ADDRESS_KIND", "MPI_Offset": "MPI_OFFSET_KIND",
           "MPI_Count": "MPI_COUNT_KIND"}
F08_HANDLES = INT_HANDLES + ["MPI_File"]
NONBLOCKING = re.compile(r"^MPI_(I[a-z]|R(put|get|accumulate|get_accumulate)$|"
                         r"(Send|Bsend|Ssend|Rsend|Recv)_init$|File_i|File_\w+_(begin|end)$)")


def f08_param(fname, ctype, pname, array):
    """(declaration, actual argument, is_choice) of one argument of the f08 procedure, or
    None when the Fortran form has no such argument."""
    shape = fortran_shape(fname, ctype, pname, array)
    if shape is None:
        return None
    base, const, core, ptr, dims, intent = shape
    if core in F08_HANDLES and not ptr and not array:
        return f"type({core}), intent(in) :: {pname}", f"{pname}%MPI_VAL", False
    if core in F08_HANDLES:
        return f"type({core}){intent} :: {pname}{dims}", (
            f"{pname}%MPI_VAL" if not array else pname), False
    if core == "int":
        t = "logical" if pname in LOGICALS else "integer"
        return f"{t}{intent} :: {pname}{dims}", pname, False
    if core in KIND_OF:
        return f"integer(kind={KIND_OF[core]}){intent} :: {pname}{dims}", pname, False
    if core == "MPI_Status":
        return f"type(MPI_Status){intent} :: {pname}{dims}", pname, False
    if base == "void*" and pname in C_PTRS:
        return f"type(c_ptr) :: {pname}", pname, False
    if base == "void*" and pname in ADDRESS_VALUES:
        return f"integer(kind=MPI_ADDRESS_KIND) :: {pname}", pname, False
    if base == "void*":
        attrs = ", asynchronous" if NONBLOCKING.match(re.sub(r"_c$", "", fname)) else ""
        return (f"type(*), dimension(..), contiguous, target{attrs} :: {pname}",
                f"oxf08_ref(c_loc({pname}))", True)
    if (base == "char*" and not array) or (base == "char" and array == "[]"):
        return f"character(len=*){intent} :: {pname}", pname, False
    if core.endswith("_function") or core.endswith("_fn"):
        return f"external :: {pname}", pname, False
    raise Unsupported(f"{ctype} {pname}")


def f08_procedure(ret, name, params, large=False):
    """(specific name, interface body, external procedure source, [(argument name,
    declaration)]) of one function; `large`: of the large-count function `name` (`MPI_X_c`),
    with MPICH's specific names `MPI_X_f08_large` / `MPI_X_f08ts_large`."""
    decls, actuals, choice = [], [], False
    names, buffers = [], []
    for t, p, arr in params:
        r = f08_param(name, t, p, arr)
        if r is None:
            continue
        d, a, c = r
        decls.append(d)
        actuals.append(a)
        names.append(p)
        choice = choice or c
        if c:
            buffers.append(p)
    base = name[:-2] if large else name
    spec = base + ("_f08ts" if choice else "_f08") + ("_large" if large else "")
    legacy = large_impl(name)[:-1] if large else "p" + name.lower()
    if ret in ("double", "MPI_Aint"):
        rtype = "double precision" if ret == "double" else "integer(kind=MPI_ADDRESS_KIND)"
        head = f"function {spec}({', '.join(names)}) result(res)"
        body_decls = decls + [f"{rtype} :: res"]
        call = [f"{rtype}, external :: {legacy}", f"res = {legacy}({', '.join(actuals)})"]
        end = f"end function {spec}"
    else:
        head = f"subroutine {spec}({', '.join(names + ['ierror'])})"
        body_decls = decls + ["integer, optional, intent(out) :: ierror"]
        # The interface declares the buffers CONTIGUOUS, so that programs built with our
        # module pass contiguous copies of array sections; a program built against
        # MPICH's module (whose MPI_SUBARRAYS_SUPPORTED is .TRUE.) may pass a
        # non-contiguous section, which is reported instead of misread.
        check = []
        for b in buffers:
            check += [f"if (oxf08_contig({b}) == 0) then",
                      f"  call oxf08_noncontig('{spec}', ierr_c)",
                      "  if (present(ierror)) ierror = ierr_c",
                      "  return",
                      "end if"]
        contig = ["interface",
                  "  integer(c_int) function oxf08_contig(b) bind(C, name='oxf08_contig')",
                  "    use, intrinsic :: iso_c_binding, only: c_int",
                  "    type(*), dimension(..), intent(in) :: b",
                  "  end function oxf08_contig",
                  "end interface"] if buffers else []
        call = ["integer :: ierr_c"] + contig + check + [
                f"call {legacy}({', '.join(actuals + ['ierr_c'])})",
                "if (present(ierror)) ierror = ierr_c"]
        end = f"end subroutine {spec}"
    iface = (f"    {head}\n      import\n      implicit none\n"
             + "".join(f"      {d}\n" for d in body_decls)
             + f"    {end}\n")
    proc = (f"{head}\n  use, intrinsic :: iso_c_binding\n  use mpi_f08_types\n"
            f"  implicit none\n"
            + "".join(f"  {d.replace(', contiguous', '')}\n" for d in body_decls)
            + "".join(f"  {c}\n" for c in call)
            + f"{end}\n")
    return spec, iface, proc, list(zip(names, decls))


def tkr(decl):
    """(type and kind, rank) of an argument declaration for generic resolution, or None
    when the argument takes anything (assumed type and rank, procedures)."""
    if decl.startswith(("type(*)", "external")):
        return None
    typ, _, var = decl.partition(" :: ")
    typ = typ.split(", intent")[0]
    for k in KIND_OF.values():
        typ = typ.replace(f"(kind={k})", "(kind=8)")
    if typ in ("integer", "logical"):
        typ += "(kind=4)"
    return typ, var.count(",") + 1 if "(" in var else 0


def distinguishable(a, b):
    """Whether two argument lists ([(name, declaration)]) may be specifics of one generic
    interface: an argument at the same position with the same name differs in type, kind
    or rank (Fortran 2018, 15.4.3.4.5)."""
    for (na, da), (nb, db) in zip(a, b):
        ta, tb = tkr(da), tkr(db)
        if na == nb and ta and tb and ta != tb:
            return True
    return False


def wrap_f(line, indent="  "):
    """Free-form continuation for lines over 132 columns."""
    out = []
    while len(line) > 120:
        cut = line.rfind(", ", 0, 110) + 1
        if cut <= 0:
            break
        out.append(line[:cut] + " &")
        line = indent + "    " + line[cut:].lstrip()
    out.append(line)
    return "\n".join(out)


def gen_f08(outdir, exports_file):
    types = []
    add = types.append
    add("! mpi_f08 of oxmpi, generated by crates/fortran/tools/gen_fort.py: do not edit.")
    add("module mpi_f08_types")
    add("  use, intrinsic :: iso_c_binding, only: c_ptr, c_loc, c_int")
    add("  implicit none")
    add("  integer, parameter :: MPI_ADDRESS_KIND = 8, MPI_OFFSET_KIND = 8, MPI_COUNT_KIND = 8")
    add("  integer, parameter :: MPI_INTEGER_KIND = 4")
    size, src, tag, err = status_layout()
    version, subversion = c_version()
    add(f"  integer, parameter :: MPI_STATUS_SIZE = {size}")
    add(f"  integer, parameter :: MPI_SOURCE = {src}, MPI_TAG = {tag}, MPI_ERROR = {err}")
    add(f"  integer, parameter :: MPI_VERSION = {version}, MPI_SUBVERSION = {subversion}")
    # .FALSE. as in Open MPI's mpi_f08 (MPICH's says .TRUE.): the buffers are CONTIGUOUS,
    # so the compiler passes copies of sections (see UNIMPLEMENTED.md).
    add("  logical, parameter :: MPI_SUBARRAYS_SUPPORTED = .false.")
    add("  logical, parameter :: MPI_ASYNC_PROTECTS_NONBLOCKING = .false.")
    for h in F08_HANDLES:
        add(f"  type, bind(C) :: {h}")
        add("    integer :: MPI_VAL")
        add(f"  end type {h}")
    add("  type, bind(C) :: MPI_Status")
    if ABI:
        add("    integer :: MPI_SOURCE, MPI_TAG, MPI_ERROR, MPI_internal(5)")
    else:
        add("    integer :: count_lo, count_hi_and_cancelled, MPI_SOURCE, MPI_TAG, MPI_ERROR")
    add("  end type MPI_Status")
    seen = {"MPI_VERSION", "MPI_SUBVERSION", "MPI_STATUS_SIZE", "MPI_ADDRESS_KIND",
            "MPI_OFFSET_KIND", "MPI_COUNT_KIND", "MPI_INTEGER_KIND", "MPI_SOURCE", "MPI_TAG",
            "MPI_ERROR"}
    if not ABI:
        add("  type(MPI_File), parameter :: MPI_FILE_NULL = MPI_File(0)")
        seen.add("MPI_FILE_NULL")
    for name, val, kind, ctype in c_constants(typed=True):
        if name.upper() in seen or name.upper() in (h.upper() for h in F08_HANDLES):
            continue
        seen.add(name.upper())
        if ctype in F08_HANDLES:
            add(f"  type({ctype}), parameter :: {name} = {ctype}({val})")
        elif kind:
            add(f"  integer(kind={kind}), parameter :: {name} = {val}")
        else:
            add(f"  integer, parameter :: {name} = {val}")
    add("  ! Sentinels: MPICH's common blocks, recognised by address in the library.")
    add("  integer :: MPI_BOTTOM, MPI_IN_PLACE")
    add("  type(MPI_Status) :: MPI_STATUS_IGNORE")
    add("  type(MPI_Status) :: MPI_STATUSES_IGNORE(1)")
    add("  integer :: MPI_ERRCODES_IGNORE(1)")
    add("  character(len=1) :: MPI_ARGVS_NULL(1,1), MPI_ARGV_NULL(1)")
    add("  integer :: MPI_UNWEIGHTED, MPI_WEIGHTS_EMPTY")
    add("  common /mpipriv1/ MPI_BOTTOM, MPI_IN_PLACE, MPI_STATUS_IGNORE")
    add("  common /mpipriv2/ MPI_STATUSES_IGNORE, MPI_ERRCODES_IGNORE")
    add("  common /mpiprivc/ MPI_ARGVS_NULL, MPI_ARGV_NULL")
    add("  common /mpifcmb5/ MPI_UNWEIGHTED")
    add("  common /mpifcmb9/ MPI_WEIGHTS_EMPTY")
    add("  save /mpipriv1/, /mpipriv2/, /mpiprivc/, /mpifcmb5/, /mpifcmb9/")
    add("  external :: MPI_COMM_DUP_FN, MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN")
    add("  external :: MPI_TYPE_DUP_FN, MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN")
    add("  external :: MPI_WIN_DUP_FN, MPI_WIN_NULL_COPY_FN, MPI_WIN_NULL_DELETE_FN")
    ops = []
    for h in F08_HANDLES:
        ops.append(h)
    # Comparison operators and status conversions are module procedures with MPICH's
    # names (__mpi_f08_types_MOD_mpi_comm_eq, ..._mpi_status_f082f).
    for op, sym in (("eq", "=="), ("neq", "/=")):
        add(f"  interface operator({sym})")
        for h in ops:
            add(f"    module procedure {h.lower()}_{op}")
        add("  end interface")
    add("contains")
    for h in ops:
        for op, sym in (("eq", "=="), ("neq", "/=")):
            fn = f"{h.lower()}_{op}"
            add(f"  elemental logical function {fn}(a, b)")
            add(f"    type({h}), intent(in) :: a, b")
            add(f"    {fn} = a%MPI_VAL {sym} b%MPI_VAL")
            add(f"  end function {fn}")
    add("  subroutine MPI_Status_f2f08(f_status, f08_status, ierror)")
    add("    integer, intent(in) :: f_status(MPI_STATUS_SIZE)")
    add("    type(MPI_Status), intent(out) :: f08_status")
    add("    integer, optional, intent(out) :: ierror")
    add("    f08_status = transfer(f_status, f08_status)")
    add("    if (present(ierror)) ierror = 0")
    add("  end subroutine MPI_Status_f2f08")
    add("  subroutine MPI_Status_f082f(f08_status, f_status, ierror)")
    add("    type(MPI_Status), intent(in) :: f08_status")
    add("    integer, intent(out) :: f_status(MPI_STATUS_SIZE)")
    add("    integer, optional, intent(out) :: ierror")
    add("    f_status = transfer(f08_status, f_status)")
    add("    if (present(ierror)) ierror = 0")
    add("  end subroutine MPI_Status_f082f")
    add("  ! A choice buffer's address as a reference the legacy wrappers accept.")
    add("  function oxf08_ref(p) result(r)")
    add("    use, intrinsic :: iso_c_binding, only: c_f_pointer")
    add("    type(c_ptr), intent(in) :: p")
    add("    integer, pointer :: r")
    add("    call c_f_pointer(p, r)")
    add("  end function oxf08_ref")
    add("end module mpi_f08_types")

    module = ["! mpi_f08 of oxmpi, generated by crates/fortran/tools/gen_fort.py: do not edit.",
              "module mpi_f08",
              "  use, intrinsic :: iso_c_binding, only: c_ptr",
              "  use mpi_f08_types",
              "  implicit none"]
    procs = ["! mpi_f08 procedures of oxmpi, generated by crates/fortran/tools/gen_fort.py.",
             "! Each calls the legacy Fortran wrapper (pmpi_x_) of libmpifort.so.12."]
    large = large_count_functions(exports_file)
    no_large = []
    for ret, name, params, kind, _ in fortran_functions(exports_file):
        if kind == "unsupported" or name in DELETED:
            continue
        spec, iface, proc, args = f08_procedure(ret, name, params)
        forms = [(iface, proc)]
        # The large-count form `MPI_X_c` through the same generic name, where its
        # arguments tell it apart (MPI_Type_get_extent_c's MPI_Count equals MPI_Aint).
        lc = large.get(name)
        if isinstance(lc, str):
            no_large.append(f"{name}_c: {lc}")
        elif lc:
            _, iface_c, proc_c, args_c = f08_procedure(lc[0], lc[1], lc[2], large=True)
            if distinguishable(args, args_c):
                forms.append((iface_c, proc_c))
            else:
                no_large.append(f"{name}_c: same argument types as {name}")
        module.append(f"  interface {name}")
        for iface, proc in forms:
            module.extend(wrap_f(l, "    ") for l in iface.rstrip("\n").split("\n"))
            procs.extend(wrap_f(l) for l in proc.rstrip("\n").split("\n"))
            procs.append("")
        module.append(f"  end interface {name}")
    # Fortran-only procedures.
    module.append("  interface MPI_F_sync_reg")
    module.append("    subroutine MPI_F_sync_reg_f08ts(buf)")
    module.append("      type(*), dimension(..), asynchronous :: buf")
    module.append("    end subroutine MPI_F_sync_reg_f08ts")
    module.append("  end interface MPI_F_sync_reg")
    procs += ["subroutine MPI_F_sync_reg_f08ts(buf)",
              "  implicit none",
              "  type(*), dimension(..), asynchronous :: buf",
              "end subroutine MPI_F_sync_reg_f08ts",
              ""]
    module.extend(sizeof_procedures(optional_ierror=True))
    module.append("end module mpi_f08")
    with open(os.path.join(outdir, "mpi_f08_types.f90"), "w") as f:
        f.write("\n".join(types) + "\n")
    with open(os.path.join(outdir, "mpi_f08.f90"), "w") as f:
        f.write("\n".join(module) + "\n")
    with open(os.path.join(outdir, "mpi_f08_procs.f90"), "w") as f:
        f.write("\n".join(procs) + "\n")
    with open(os.path.join(outdir, "fort-f08-no-large-count.txt"), "w") as f:
        f.write("".join(l + "\n" for l in sorted(no_large)))


def main(argv):
    global ABI
    if "--abi" in argv:
        ABI = True
        argv = [a for a in argv if a != "--abi"]
    if len(argv) == 4 and argv[1] == "wrappers":
        gen_wrappers(argv[2], argv[3])
    elif len(argv) in (3, 4) and argv[1] == "mpifh":
        gen_mpifh(argv[2], argv[3] if len(argv) == 4 else None)
    elif len(argv) == 4 and argv[1] == "f08":
        gen_f08(argv[2], argv[3])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
