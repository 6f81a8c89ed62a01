-- Card checkouts (issue "Step 24") are charges too: a link the card holder pays at the card
-- provider's page instead of a code, with the same life (ativa, paga, creditada, …), the same gate
-- (one paid charge per recharge) and the same refund. `copia_e_cola` holds the link, `end_to_end_id`
-- the provider's payment id.
ALTER TABLE pix_charges ADD COLUMN meio TEXT NOT NULL DEFAULT 'pix';
