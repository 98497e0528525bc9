"""Execute a notebook in place: ``python run_notebook.py NOTEBOOK.ipynb WORKING_DIRECTORY``.

When no build has recorded a notebook's glued values, the check of tools/nbval_stability.py runs it here,
unperturbed, in a process of its own (nbclient's event loop and kernel are then that process's own), while
another worker's kernels run. Its kernel talks over Unix sockets beside the notebook, not TCP: two kernels
started at the same moment can otherwise be handed the same free TCP port, and one dies before it replies.
A cell that raises ends the run with exit status 1 and the error.
"""

import sys
from pathlib import Path

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient

CELL_TIMEOUT_S = 300


def main(notebook_path: str, working_directory: str) -> int:
    notebook = nbformat.read(notebook_path, as_version=4)
    sockets = Path(notebook_path).with_suffix("")  # kernel's sockets: <notebook>-1, <notebook>-2, ...
    kernel = KernelManager(kernel_name="python3", transport="ipc", ip=str(sockets))
    client = NotebookClient(notebook, km=kernel, timeout=CELL_TIMEOUT_S,
                            resources={"metadata": {"path": working_directory}})
    try:
        client.execute()
    finally:
        nbformat.write(notebook, notebook_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))
