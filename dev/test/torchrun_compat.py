"""torchrun for the tests where torch's own does not start: torch 1.13's launcher on Python 3.11
(Debian 12's), with its one fault there mended. Python 3.11 no longer yields an IntFlag's zero
and multi-bit members when iterating it, so Std.from_str("0"), the default of --redirects and
--tee, returns None and the launcher stops at start-up with an AttributeError. Everything else
is torch.distributed.run as installed: its rendezvous, its workers, its signal handling."""
from torch.distributed.elastic.multiprocessing.api import Std
from torch.distributed.run import main


def std_from_str(cls, text):
    if ":" in text:  # "0:3,1:0": a setting per local rank
        return {int(rank): cls(int(value)) for rank, value in (pair.split(":") for pair in text.split(","))}
    return cls(int(text))


if __name__ == "__main__":
    Std.from_str = classmethod(std_from_str)
    main()
