"""JSMA on the embedded digits classifier, the foolbox 3 way.

python examples/foolbox_jsma.py --images 32
"""

from __future__ import annotations

import argparse

import foolbox as fb

from paperports.adapters.digits import digits_classifier, load_digits_tensors
from paperports.integrations.foolbox import SaliencyMapAttack


def main(images: int = 32) -> float:
    model = digits_classifier(28)  # trained on first use (seconds), then cached
    x, y = load_digits_tensors(28, "test")
    x, y = x[:images], y[:images]
    targets = (y + 1) % 10

    fmodel = fb.PyTorchModel(model, bounds=(0, 1), device="cpu")  # where x is
    criterion = fb.criteria.TargetedMisclassification(targets)
    raw, _, success = SaliencyMapAttack()(fmodel, x, criterion, epsilons=None)

    changed = fb.distances.l0(x, raw) / x[0].numel()
    rate = float(success.float().mean())
    print(f"targeted success {rate:.1%}; mean features changed {changed[success].mean():.2%}")
    return rate


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=32)
    main(parser.parse_args().images)
