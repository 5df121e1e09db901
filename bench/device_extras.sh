#!/usr/bin/env bash
# Adds to the device bundle (.device-bundle/, made by ../shared/tools/device_bundle.sh) what the GPU machine's image
# lacks and the shared bundle does not pack, within the 64 MiB a device call carries with the checkout:
#   - Streamlit 1.67 and the packages it needs that the image lacks (altair, protobuf, starlette, ...), installed here
#     for the device's Python 3.12 and packed without Streamlit's web front end (static/, 26 MB: AppTest serves
#     nothing), so tests/test_dashboard_device.py and the preset page tests run there (issue 39, row 3);
#   - the data sets packed with xz instead of one gzip per file (MNIST and Fashion-MNIST: 36 MB instead of 41 MB);
#     DATASETS=FashionMNIST packs one (26 MB), as the shared bundle's DATASETS does.
# The bundle's prelude.sh becomes a wrapper that unpacks both, then sources the shared one (prelude.shared.sh).
# Checked on 2026-11-28: the image had pandas 3.0.6 and pyarrow 25.0.1, no streamlit, no mlflow. Run it again after
# each commit: it records the checkout's commit for device_check.sh's summary.
#
#   bash ../shared/tools/device_bundle.sh && bash bench/device_extras.sh
set -euo pipefail
[[ -f .device-bundle/prelude.sh ]] || { echo "run ../shared/tools/device_bundle.sh first, from the project root" >&2; exit 2; }
bundle=$(pwd)/.device-bundle
shared=$(cd ../shared && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
platform=(--python-version 3.12 --implementation cp --only-binary=:all: --platform manylinux_2_28_x86_64
          --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
# Streamlit's own needs, less those the image has (numpy, pandas, pyarrow, pillow, packaging, typing-extensions,
# jinja2) and pydeck (imported only by Streamlit's map demo)
python3 -m pip download -q --no-deps "${platform[@]}" -d "$work/whl" streamlit==1.67.0 altair==6.3.0 jsonschema \
  jsonschema-specifications referencing rpds-py attrs protobuf watchdog starlette uvicorn anyio sniffio itsdangerous \
  python-multipart websockets h11 click requests urllib3 idna charset-normalizer certifi 2>&1 | grep -v -i warning || true
python3 -m pip install -q --no-deps --no-compile "${platform[@]}" --target "$work/site" "$work"/whl/*.whl
rm -rf "$work/site/streamlit/static" "$work/site/bin"
tar -C "$work/site" -cf - . | xz -6 -T0 > "$bundle/streamlit-site.tar.xz"
rm -rf "$bundle/data"
mkdir -p "$work/data"
(cd "$shared/data" && tar -cf - $(for d in ${DATASETS:-MNIST FashionMNIST}; do echo "$d/raw"; done)) \
  | xz -6 -T0 > "$bundle/data.tar.xz"
[[ -f "$bundle/prelude.shared.sh" ]] || mv "$bundle/prelude.sh" "$bundle/prelude.shared.sh"  # run twice: same result
cat > "$bundle/prelude.sh" <<'PRELUDE'
# bench/device_extras.sh: the data sets and Streamlit unpacked, then the shared bundle's prelude (it copies the data
# only when /tmp/data is absent).
_x=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p /tmp/data /tmp/streamlit-site
[[ -e /tmp/data/.unpacked ]] || { tar -xJf "$_x/data.tar.xz" -C /tmp/data && touch /tmp/data/.unpacked; }
tar -xJf "$_x/streamlit-site.tar.xz" -C /tmp/streamlit-site
export PYTHONPATH=/tmp/streamlit-site${PYTHONPATH:+:$PYTHONPATH}
source "$_x/prelude.shared.sh"
PRELUDE
# What the device runs is this checkout as it is now: its commit, and whether files differ from it (then the figures
# are not of that commit alone); device_check.sh prints it in its summary.
echo "commit: $(git rev-parse HEAD), $(git status --porcelain --untracked-files=no | wc -l) tracked files changed since" \
  > "$bundle/commit"
du -sh "$bundle"
