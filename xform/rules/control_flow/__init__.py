"""Control flow: cond/switch, while_loop, fori_loop and scan, each a primitive holding closed
sub-graphs in its params, with jvp, vjp and batch rules built from transformed sub-graphs
(xform.transforms.derived). Importing the package registers them."""
from xform.rules.control_flow.cond import cond, cond_p, switch
from xform.rules.control_flow.fori import fori_loop
from xform.rules.control_flow.scan import scan, scan_p
from xform.rules.control_flow.while_loop import while_grad_p, while_loop, while_p

__all__ = ["cond", "cond_p", "fori_loop", "scan", "scan_p", "switch", "while_grad_p",
           "while_loop", "while_p"]
