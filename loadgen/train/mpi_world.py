"""One rank's place in an mpirun job (mpi4py's COMM_WORLD): its rank, the node it runs on
and its rank there. Nodes are told apart the way Open MPI itself does (ranks that share
memory), not by host name: the namespace lab's nodes share one."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MpiRank:
    comm: Any  # mpi4py.MPI.Intracomm (COMM_WORLD)
    rank: int
    size: int
    local_rank: int
    local_size: int
    node_rank: int
    nodes: int
    host: str
    library: str

    @property
    def is_leader(self) -> bool:
        return self.rank == 0


def join_world() -> MpiRank:
    """Initialises MPI (on import of mpi4py.MPI) and finds this rank's node."""
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    local = world.Split_type(MPI.COMM_TYPE_SHARED)
    local_rank, local_size = local.Get_rank(), local.Get_size()
    leader = local.bcast(world.Get_rank(), root=0)
    local.Free()
    leaders = world.allgather(local_rank == 0)
    library = MPI.Get_library_version().splitlines()[0].strip("\x00 ")
    return MpiRank(
        comm=world, rank=world.Get_rank(), size=world.Get_size(), local_rank=local_rank,
        local_size=local_size, node_rank=sum(leaders[:leader]), nodes=sum(leaders),
        host=socket.gethostname(), library=library,
    )
