"""What every trace reader shares: opening a file safely, event checks, names and exact times."""
