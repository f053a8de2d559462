"""Readers of what tileiras produced, for the artifacts' views: none of them is part of the
safety argument (docs/safety.md, "The trusted base"), they only describe a cubin that was
already checked and built.

* :mod:`.elf`: the ELF64 container (sections, symbols, notes), with :mod:`struct` alone;
* :mod:`.nvinfo`: the ``.nv.info`` attribute records of a cubin;
* :mod:`.resources`: registers, threads, shared memory, stack and spills of a kernel
  (from ``.nv.info`` and ``ptxas -v``);
* :mod:`.cubin`: the cubin as a whole: its kernels, arch, embedded PTX and resources;
* :mod:`.sass`: SASS from ``nvdisasm``, its lines mapped to the user's source;
* :mod:`.remarks`: tileiras' optimization remarks (YAML), located in the user's source.
"""
