"""Artifacts from the cache map debug locations of an earlier definition of the same text."""
import tilelab as tl
from tilelab.compiler.locations import location_mapper
from tilelab.kernels.examples import vector_add


def test_cached_names_of_the_same_text_map_to_the_current_source():
    x = tl.spec(4096, "float32")
    d = vector_add.definition
    lk = d.lowered(d.specialize((x.partition(256), x, x)).plan)
    m = location_mapper(lk)
    digest = lk.filename.rsplit(" ", 1)[-1]
    line = d.analysis.source.tree.lineno + 1
    earlier = f"<tilelab-lowered vector_add In[3]:5 {digest}"
    assert m(earlier, line, 4)[:2] == (d.analysis.source.filename, line)
    assert m(lk.filename, line, 4)[:2] == (d.analysis.source.filename, line)
    other = "<tilelab-lowered vector_add In[3]:5 0123456789>"
    assert m(other, line, 4)[0] == other          # another text: left alone
