"""The devices of the real nodes' DRA drivers, from an InferenceClass: what `controlplane.sh up --kubelets` gives
each node's test DRA driver (tests/controlplane/modules/dra-driver), the same devices a simulated node of that class
publishes (simulated_nodes.driver_devices), and the DeviceClasses the drivers' charts would install.

    python node_devices.py CLASS_YAML OUT_DIR

writes OUT_DIR/<driver>.devices.json for each DRA driver the class names and OUT_DIR/deviceclass-<name>.json for
each DeviceClass, and prints the drivers' names, one a line. Needs PyYAML (the tests' virtualenv has it).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from simulated_nodes import device_classes, driver_devices


def write(class_file: Path, out: Path) -> list[str]:
    documents = [d for d in yaml.safe_load_all(class_file.read_text()) if d]
    classes = [d for d in documents if d.get("kind") == "InferenceClass"]
    if len(classes) != 1:
        raise ValueError(f"{class_file}: expected one InferenceClass, found {len(classes)}")
    (inference_class,) = classes
    drivers = sorted({d["driver"] for d in inference_class["spec"].get("devices") or [] if d.get("claim") == "DRA"})
    out.mkdir(parents=True, exist_ok=True)
    for driver in drivers:
        (out / f"{driver}.devices.json").write_text(json.dumps(driver_devices(inference_class, driver), indent=1))
    for device_class in device_classes([inference_class]):
        (out / f"deviceclass-{device_class['metadata']['name']}.json").write_text(json.dumps(device_class))
    return drivers


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        sys.exit("usage: node_devices.py CLASS_YAML OUT_DIR")
    for driver in write(Path(argv[0]), Path(argv[1])):
        print(driver)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (OSError, KeyError, ValueError, yaml.YAMLError) as error:
        sys.exit(f"node_devices.py: {error}")
