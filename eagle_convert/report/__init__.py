"""`report`: inspect, upgrade (identity and calibrated), fine-tune, validate and measure one draft, side by side."""
