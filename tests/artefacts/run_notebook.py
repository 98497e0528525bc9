"""Run one notebook top to bottom, as Jupyter's "Run All" does: ``python run_notebook.py NOTEBOOK CELL_TIMEOUT_S``.

tests/artefacts runs this file with the Python of the environment a reader installed from the notebooks
zip, so nbclient, the kernel and everything the notebook imports are that environment's. The kernel's
working directory is the notebook's folder, as in Jupyter. It prints one line per code cell whose
output has a stderr stream (a warning box in Jupyter), and on the first cell that raises or outruns the
timeout it prints which cell (its number and first line) and the error, and exits with status 1.
"""

import re
import sys
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError


ANSI_COLOUR = re.compile(r"\x1b\[[0-9;]*m")  # IPython colours its tracebacks


def first_line(cell) -> str:
    return next((line for line in cell.source.splitlines() if line.strip()), "")[:100]


def main(path: str, cell_timeout: str) -> int:
    notebook_path = Path(path)
    notebook = nbformat.read(notebook_path, as_version=4)
    name = notebook.metadata.kernelspec.name  # the kernel Jupyter picks for the notebook
    # jupyter_client starts a kernel whose argv begins with "python" with this very interpreter
    command = KernelSpecManager().get_kernel_spec(name).argv[0]
    if command not in ("python", "python3", sys.executable):
        print(f"kernel {name!r} runs {command}, not this environment's Python {sys.executable}")
        return 1
    client = NotebookClient(notebook, kernel_name=name, timeout=float(cell_timeout),
                            resources={"metadata": {"path": str(notebook_path.parent)}})
    with client.setup_kernel():
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type != "code":
                continue
            where = f"{notebook_path.name}, cell {index} ({first_line(cell)!r})"
            try:
                client.execute_cell(cell, index)
            except CellTimeoutError:
                print(f"{where} did not finish within {cell_timeout} s")
                return 1
            except CellExecutionError as error:
                print(f"{where} raised:\n{ANSI_COLOUR.sub('', str(error))}")
                return 1
            for output in cell.outputs:
                if output.output_type == "stream" and output.name == "stderr":
                    print(f"STDERR {where}: {output.text.strip()[:500]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:]))
