"""The short TTT fine-tune of an upgraded draft: plan and refusals, then the torch run."""
